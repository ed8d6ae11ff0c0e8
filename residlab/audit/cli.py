"""The command line of the Residual Contribution Audit: ``audit`` writes a packet, ``verify`` re-runs and checks one.

    residlab audit --specimen llama --clean-ids 3,14,15,9 --corrupt-ids 3,14,15,26 --target-id 5 --rival-id 8 --output p1
    residlab audit verify p1
    residlab audit --model DIR --clean TEXT --corrupt TEXT --target TOKEN --rival TOKEN [--site attn:0:-1 ...] --output p2
    residlab audit verify p2 --model DIR
    residlab audit --model DIR ... --dtype bfloat16 --device cuda --output p3
    residlab audit --model DIR ... --device-map auto --max-memory cpu=2GB --output p4   (needs accelerate)
    residlab audit verify p4 --model DIR --device-map auto --max-memory cpu=2GB

Without ``--site``, both writes of every block are audited at the last position. ``--device``, ``--device-map``
and ``--max-memory`` say where the model runs, ``--dtype`` what in (``loading``); verify re-runs in the
packet's dtype wherever it is told to run. Exit status: 0 done (or verified), 1 refused or not verified, 2 bad
arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from residlab.capture.blocks import SPECIMEN_CONFIGS
from residlab.capture.outdir import OutputDirectoryError, check_output_directory
from residlab.audit.subject import DTYPES, AuditError, seed_argument
from residlab.audit.loading import (
    ACCELERATE_PIN, Placement, check_device, parse_max_memory, place_directory, place_specimen,
)  # fmt: skip
from residlab.audit.runs import MAX_THREADS, AuditInput, parse_ids, parse_site, single_token, tokenize_prompt
from residlab.audit.packet import audit_to_directory, summary_lines
from residlab.audit.verify import read_packet, subject_from_packet, verify_packet


def _add_model_arguments(parser: argparse.ArgumentParser, extra_sources: dict) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--model", type=Path, metavar="DIR", help="a local model directory (config.json + safetensors)")
    group.add_argument("--specimen", metavar="NAME",
                       help=f"a random-weight specimen: {', '.join(SPECIMEN_CONFIGS)}")  # fmt: skip
    for name, (help_text, _) in extra_sources.items():
        group.add_argument(f"--{name}", action="store_true", help=help_text)
    parser.add_argument("--seed", type=seed_argument, default=None, help="the specimen's weight seed (default 0; only with --specimen)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N or mps, where present")
    parser.add_argument("--device-map", metavar="auto", help=f"auto: spread the model over the accelerators, the CPU "
                        f"and disk with accelerate (pip install {ACCELERATE_PIN})")  # fmt: skip
    parser.add_argument("--max-memory", metavar="DEVICE=SIZE,...", help="with --device-map auto: each device's "
                        "budget, e.g. cpu=2GB or 0=20GiB,cpu=64GiB; what no budget holds is offloaded to disk")  # fmt: skip


def placement_of(args, dtype: str) -> Placement:
    """The placement the arguments ask for, every value checked before any model is built or loaded."""
    max_memory = None if args.max_memory is None else parse_max_memory(args.max_memory)
    device = check_device(args.device)
    return Placement(device, dtype, args.device_map, max_memory)


def _check_seed(args) -> None:
    """--seed chooses a specimen's weights: with any other source it could not apply, so it is refused."""
    if args.seed is not None and args.specimen is None:
        raise AuditError("--seed applies only with --specimen NAME (a model directory or the copy model has fixed weights)")


def build_audit_parser(prog: str, extra_sources: dict) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Audit declared residual writes; write a verifiable packet.",
                                     epilog=f"To check a packet: {prog} verify PACKET [--model DIR | --specimen NAME]")  # fmt: skip
    _add_model_arguments(parser, extra_sources)
    for which in ("clean", "corrupt"):
        group = parser.add_mutually_exclusive_group()
        group.add_argument(f"--{which}", metavar="TEXT", help=f"the {which} prompt (needs the model's tokenizer)")
        group.add_argument(f"--{which}-ids", metavar="IDS", help=f"the {which} prompt as comma-separated token ids")
    for which in ("target", "rival"):
        group = parser.add_mutually_exclusive_group()
        group.add_argument(f"--{which}", metavar="TOKEN", help=f"the {which} token, as text that is one token")
        group.add_argument(f"--{which}-id", type=int, metavar="ID", help=f"the {which} token id")
    parser.add_argument("--site", action="append", default=[], metavar="COMPONENT:BLOCK:POSITION",
                        help="a write to audit, e.g. attn:2:-1 (repeatable; default: every write at the last position)")
    parser.add_argument("--dtype", default="float32", help=f"{', '.join(DTYPES)}: float32 (default), or a declared "
                        "approximation whose tolerances the packet records")  # fmt: skip
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: reproducible sums)")
    parser.add_argument("--output", type=Path, metavar="DIR", required=True, help="an empty or new directory")
    return parser


def load_subject(args, extra_sources: dict, placement: Placement):
    for name, (_, loader) in extra_sources.items():
        if getattr(args, name.replace("-", "_"), False):
            if placement != Placement():
                raise AuditError(f"--{name} runs in float32 on the CPU only: leave out --device, --dtype and --device-map")
            return loader()
    if args.model is not None:
        return place_directory(args.model, placement)
    if args.specimen is not None:
        return place_specimen(args.specimen, args.seed or 0, placement)
    return None


def _release(subject) -> None:
    """A dispatched model's offload folder removed now, not at interpreter exit."""
    if subject is not None and subject.offload_folder is not None:
        subject.offload_folder.cleanup()


def _prompt(subject, args, which: str) -> tuple[list[int], str | None]:
    text, ids = getattr(args, which), getattr(args, f"{which}_ids")
    if text is not None:
        return tokenize_prompt(subject, text, which), text
    if ids is None:
        raise AuditError(f"give --{which} TEXT or --{which}-ids IDS")
    return parse_ids(ids, which), None


def _token(subject, args, which: str) -> tuple[int, str | None]:
    text, token_id = getattr(args, which), getattr(args, f"{which}_id")
    if text is not None:
        return single_token(subject, text, which), text
    if token_id is None:
        raise AuditError(f"give --{which} TOKEN or --{which}-id ID")
    return token_id, None


def run_audit_command(args, extra_sources: dict) -> int:
    check_output_directory(args.output)  # refused before any model is loaded
    _check_seed(args)
    if not 1 <= args.threads <= MAX_THREADS:
        raise AuditError(f"--threads must be from 1 to {MAX_THREADS}")
    subject = load_subject(args, extra_sources, placement_of(args, args.dtype))
    if subject is None:
        raise AuditError("give --model DIR or --specimen NAME")
    try:
        return _audit(subject, args)
    finally:
        _release(subject)


def _audit(subject, args) -> int:
    clean, clean_text = _prompt(subject, args, "clean")
    corrupt, corrupt_text = _prompt(subject, args, "corrupt")
    target, target_text = _token(subject, args, "target")
    rival, rival_text = _token(subject, args, "rival")
    audit_input = AuditInput(tuple(clean), tuple(corrupt), target, rival, clean_text, corrupt_text, target_text, rival_text)
    blocks = len(subject.blocks)
    if len(clean) != len(corrupt):  # before parsing sites, whose positions depend on the length
        raise AuditError(f"the clean prompt is {len(clean)} tokens and the corrupt prompt {len(corrupt)}: "
                         "they must have the same token length")  # fmt: skip
    texts = args.site or [f"{component}:{block}:-1" for block in range(blocks) for component in ("attn", "mlp")]
    sites = [parse_site(text, blocks, len(clean)) for text in texts]
    packet = audit_to_directory(subject, audit_input, sites, args.output, threads=args.threads)
    for line in summary_lines(packet):
        print(line)
    print(f"ran in {subject.dtype} on {subject.placement}" + ("" if subject.dtype == "float32" else
          f": a declared approximation, tolerances float32's x {packet['model']['execution']['tolerance_scale']}"))
    print(f"wrote model.json, input.json, intervention.json, measurement.json into {args.output}")
    return 0


def run_verify_command(argv: list[str], prog: str, extra_sources: dict) -> int:
    parser = argparse.ArgumentParser(prog=f"{prog} verify", description="Re-run an audit packet and check it.")
    parser.add_argument("packet", type=Path, help="the packet directory")
    _add_model_arguments(parser, extra_sources)
    args = parser.parse_args(argv)
    _check_seed(args)
    dtype = read_packet(args.packet)["model"]["execution"]["dtype"]  # the re-run's, whatever the device
    placement = placement_of(args, dtype)
    subject = load_subject(args, extra_sources, placement) or subject_from_packet(args.packet, placement)
    try:
        report = verify_packet(args.packet, subject)
    finally:
        _release(subject)
    print("\n".join(report.printed()))
    return 0 if report.passed else 1


def main(argv: list[str] | None = None, prog: str = "audit_residual_writes.py", extra_sources: dict | None = None) -> int:
    """``extra_sources``: option name -> (help, loader) for models only the package offers (the copy model)."""
    argv = sys.argv[1:] if argv is None else argv
    extra_sources = extra_sources or {}
    try:
        if argv and argv[0] == "verify":
            return run_verify_command(argv[1:], prog, extra_sources)
        args = build_audit_parser(prog, extra_sources).parse_args(argv)
        return run_audit_command(args, extra_sources)
    except (AuditError, OutputDirectoryError) as error:  # a refusal: one line, nothing written
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
