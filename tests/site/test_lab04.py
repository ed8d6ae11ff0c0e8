"""Lab 04's page covers the control in its profile section and solution. That the downloadable runner prints exactly
what the built page shows is checked where a learner runs it (tests/site/test_page_commands.py: both of the page's
runs, each printed section found on the page)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_the_profile_section_and_solution_cover_the_control(built_site):
    from built_text import shown

    text = shown(built_site.site, "labs/04-read-transformer-paper.html")
    assert "pre-LN + final LN 1-9" in text and "pre-LN + final LN 10-18" in text
    assert "Compare levels only with the control." in text
    assert "The control’s gradient is larger than the post-LN one at none of the 18 depths" in text
