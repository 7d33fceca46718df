"""The parser against its documentation: ``--version``, help and defaults for every option,
lower-case flag names, and the README's command-line table checked both ways."""

from __future__ import annotations

import argparse
import re
from importlib.metadata import version
from pathlib import Path

import pytest

from ntkcheck.cli import build_parser, main
from ntkcheck.cli._args import EXIT_CODES

README = Path(__file__).resolve().parents[2] / "README.md"


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    p = build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _visible_options(sp: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in sp._actions if a.option_strings and a.help != argparse.SUPPRESS
            and not isinstance(a, argparse._HelpAction)]


def _readme_table() -> dict[str, set[str]]:
    """``{command: {--option, ...}}`` from the first table of the README's "The command line"."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## The command line"):]
    section = section[:section.index("\n## ", 3)]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"^\| `ntkcheck (\w+)[^`]*` \|", line)
        if m:
            rows[m.group(1)] = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", line))
    return rows


def test_version(capsys):
    assert main(["--version"]) == 0  # answered before the subcommands load (tests/cli/test_cli_interfaces.py)
    assert capsys.readouterr().out.strip() == f"ntkcheck {version('ntkcheck')}"


def test_every_option_has_help_and_states_its_default():
    """Issue 13: no help for --property, --method; no stated default for --dist, --digits."""
    missing, no_default = [], []
    for name, sp in _subparsers().items():
        for a in _visible_options(sp):
            flag = f"{name} {a.option_strings[-1]}"
            if not a.help:
                missing.append(flag)
            # store_true/false flags default to "off" by construction; every other default is stated
            takes_value = not isinstance(a, (argparse._StoreTrueAction, argparse._StoreFalseAction))
            if takes_value and a.default is not None and "default" not in (a.help or ""):
                no_default.append(flag)
    assert missing == [] and no_default == [], (missing, no_default)


def test_flags_are_lower_case_and_depth_t_keeps_its_old_spelling(capsys, tmp_path):
    upper = [o for sp in _subparsers().values() for a in _visible_options(sp) for o in a.option_strings
             if o != o.lower()]
    assert upper == []
    for verb in ("screen", "flow"):
        sp = _subparsers()[verb]
        assert sp.parse_args(["--depth-T", "2.5"]).depth_T == 2.5  # hidden alias, same destination
        assert sp.parse_args(["--depth-t", "1.5"]).depth_T == 1.5
        assert "--depth-T" not in sp.format_help()


def test_q_scale_is_described_alike():
    """Issue 13: --q-scale was "std" in flow and "scale" in screen."""
    helps = {verb: next(a.help for a in _visible_options(sp) if "--q-scale" in a.option_strings)
             for verb, sp in _subparsers().items() if verb in ("screen", "gram", "flow")}
    assert all(h.startswith("scale of the Q entries: the standard deviation") for h in helps.values()), helps


@pytest.mark.parametrize("verb", ["decide", "screen", "gram", "certify", "flow", "claims", "tokens", "experiment"])
def test_help_states_the_exit_statuses(verb, capsys):
    with pytest.raises(SystemExit):
        main([verb, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "exit status:" in out and "2 bad input" in out
    assert " ".join(EXIT_CODES[verb].split()) in out


def test_readme_table_matches_the_parser():
    """Every subcommand and every option of the parser appears in the README's table, and
    every option named in the table exists in the parser."""
    table = _readme_table()
    parsers = _subparsers()
    assert set(table) == set(parsers)
    for name, sp in parsers.items():
        options = {o for a in _visible_options(sp) for o in a.option_strings if o.startswith("--")}
        assert options - table[name] == set(), f"{name}: options missing from the README"
        assert table[name] - options == set(), f"{name}: README names options the parser lacks"


def test_readme_table_check_sees_a_missing_option(monkeypatch):
    """The check above fails when an option is missing (a README row without --json)."""
    rows = _readme_table()
    rows["screen"].discard("--json")
    options = {o for a in _visible_options(_subparsers()["screen"]) for o in a.option_strings}
    assert "--json" in options - rows["screen"]
