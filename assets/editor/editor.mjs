// Lab 05 Part 3's code editor: CodeMirror 6 from the packages assets/editor/package-lock.json pins, bundled by
// esbuild into one script the site serves (residlab/build/editor_bundle.py, a post-render step). The site's loader
// fetches it just before python-editor.js, when the editor nears the screen (assets/site/explorers.html);
// python-editor.js builds the editor with window.residlabCodeEditor.create and falls back to a textarea without it.
//
// Python highlighting (token classes, coloured below for the light and the dark scheme, each at 4.5:1 or better on
// its background), line numbers, Python's indentation (Enter keeps it and indents after a colon; Tab and Shift+Tab
// indent and dedent the lines). Tab is the editor's, so a keyboard user leaves with CodeMirror's own escape: Escape,
// then Tab (or Shift+Tab) within two seconds, moves the focus on; the page says so in the editor's help line.
import { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
import { python } from "@codemirror/lang-python";
import { bracketMatching, indentOnInput, indentUnit, syntaxHighlighting } from "@codemirror/language";
import { EditorState } from "@codemirror/state";
import { EditorView, drawSelection, keymap, lineNumbers } from "@codemirror/view";
import { classHighlighter } from "@lezer/highlight";

// Light on the page's white, dark on its #16181d (assets/site/theme-dark.scss); the dark scheme is body.quarto-dark.
const COLOURS = {
  light: { text: "#212529", muted: "#5e6166", gutter: "#f1f3f5", border: "#8c949c", focus: "#1a57a8", keyword: "#8f1c8f",
    string: "#1d6b22", number: "#a0410d", comment: "#5e6166", definition: "#1a57a8", selection: "#cfe2ff" },
  dark: { text: "#e2e5e9", muted: "#a9b0b8", gutter: "#1f2329", border: "#8c949c", focus: "#8ab4f8", keyword: "#e39ff6",
    string: "#98d69b", number: "#f5b48a", comment: "#a9b0b8", definition: "#8ab4f8", selection: "#2f4a75" },
};

function schemeRules(scope, colours) {
  return {
    [`${scope}`]: { color: colours.text, backgroundColor: "transparent", border: `1px solid ${colours.border}` },
    [`${scope}.cm-focused`]: { outline: `2px solid ${colours.focus}`, outlineOffset: "1px" },
    [`${scope} .cm-gutters`]: { color: colours.muted, backgroundColor: colours.gutter, borderRight: `1px solid ${colours.border}` },
    [`${scope} .cm-cursor`]: { borderLeftColor: colours.text },
    [`${scope} .cm-selectionBackground, ${scope}.cm-focused .cm-selectionBackground`]: { backgroundColor: `${colours.selection} !important` },
    [`${scope} .tok-keyword, ${scope} .tok-bool, ${scope} .tok-atom`]: { color: colours.keyword },
    [`${scope} .tok-string`]: { color: colours.string },
    [`${scope} .tok-number`]: { color: colours.number },
    [`${scope} .tok-comment`]: { color: colours.comment, fontStyle: "italic" },
    [`${scope} .tok-definition, ${scope} .tok-className`]: { color: colours.definition },
  };
}

const theme = EditorView.theme({
  "&": { maxHeight: "34em", fontSize: "0.875rem" },
  ".cm-scroller": { fontFamily: "var(--bs-font-monospace, monospace)", overflow: "auto" },
  ".cm-content": { minHeight: "12em" },
  ...schemeRules("&", COLOURS.light),
  ...schemeRules("body.quarto-dark &", COLOURS.dark),
});

window.residlabCodeEditor = Object.freeze({
  // An editor in `parent`, named by the element `labelledBy` and described by `describedBy` (ids); onChange() after
  // every edit. Returns get() and set(text).
  create({ parent, labelledBy, describedBy, onChange }) {
    const view = new EditorView({
      parent,
      state: EditorState.create({
        doc: "",
        extensions: [
          lineNumbers(), history(), drawSelection(), indentOnInput(), bracketMatching(), EditorState.tabSize.of(4),
          indentUnit.of("    "), python(), syntaxHighlighting(classHighlighter), theme,
          keymap.of([...defaultKeymap, ...historyKeymap, indentWithTab]),
          // tabindex: axe counts a contenteditable as no keyboard access to the scrolling box around it
          EditorView.contentAttributes.of({ tabindex: "0", "aria-labelledby": labelledBy, "aria-describedby": describedBy,
            spellcheck: "false", autocapitalize: "off", autocorrect: "off", translate: "no" }),
          EditorView.updateListener.of((update) => { if (update.docChanged) onChange(); }),
        ],
      }),
    });
    return {
      get: () => view.state.doc.toString(),
      set: (text) => view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } }),
    };
  },
});
