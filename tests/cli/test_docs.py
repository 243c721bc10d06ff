"""The documentation stays true: the README fits on a page and keeps its two commands, CI runs
the README's test command, the configuration reference is what the key table generates, the
presets' results table says what presets.toml records, the architecture page names every
module, and every link between pages resolves."""

import re
from pathlib import Path

from rltui.config.keys import KEYS
from rltui.config.reference import REGENERATE, render_markdown

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RUN_COMMAND = "python3 -m venv .venv && . .venv/bin/activate && pip install . && rltui launch"
TEST_COMMAND = 'python3 -m venv .venv && . .venv/bin/activate && pip install ".[test]" && pytest'
PAGES = ("command-line", "dashboard", "configuration", "run-directory", "control-protocol", "multi-process",
         "algorithms", "presets", "architecture", "benchmarks")


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_readme_fits_on_a_page_with_the_two_commands_first():
    readme = read(ROOT / "README.md")
    assert len(readme.splitlines()) < 200
    head = readme[: readme.index("\n## ")]  # before the first section
    assert f"```sh\n{RUN_COMMAND}\n```" in head
    assert f"```sh\n{TEST_COMMAND}\n```" in head


def test_readme_shows_the_dashboard_screenshot():
    readme = read(ROOT / "README.md")
    assert re.search(r"!\[[^\]]+\]\(docs/dashboard\.svg\)", readme)
    assert read(DOCS / "dashboard.svg").lstrip().startswith("<svg")


def test_ci_runs_the_readme_test_command():
    # CI may add steps between them (printing the machine), but it runs every step of the
    # README's test command, in order.
    assert TEST_COMMAND in read(ROOT / "README.md")
    ci_steps = [step.strip() for line in read(ROOT / ".ci" / "run").splitlines()
                if line.strip() and not line.lstrip().startswith("#") for step in line.split(" && ")]
    remaining = iter(ci_steps)
    missing = [step for step in TEST_COMMAND.split(" && ") if step not in remaining]
    assert not missing, f"CI does not run these steps of the README's test command: {missing}"


def test_configuration_page_is_what_the_key_table_generates():
    page = read(DOCS / "configuration.md")
    assert page == render_markdown(), f"docs/configuration.md is stale: run `{REGENERATE}`"


def test_configuration_page_documents_every_config_key():
    page = read(DOCS / "configuration.md")
    missing = [key for key in KEYS if f"| `{key}` |" not in page]
    assert not missing


def test_every_reference_page_is_in_the_index_and_the_readme():
    index, readme = read(DOCS / "README.md"), read(ROOT / "README.md")
    for page in PAGES:
        assert (DOCS / f"{page}.md").is_file(), page
        assert f"]({page}.md)" in index, page
        assert f"](docs/{page}.md)" in readme, page


def test_relative_links_resolve():
    # Every relative link (and #anchor) in the README and docs points at a file (and heading) that exists.
    def anchors(path: Path) -> set[str]:
        headings = re.findall(r"^#+ (.+)$", read(path), flags=re.MULTILINE)
        return {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}

    broken = []
    for source in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for target in re.findall(r"\]\(([^)\s]+)\)", read(source)):
            if re.match(r"[a-z]+:", target):
                continue  # an external address
            file, _, anchor = target.partition("#")
            path = (source.parent / file).resolve() if file else source
            if not path.exists() or (anchor and path.suffix == ".md" and anchor not in anchors(path)):
                broken.append(f"{source.relative_to(ROOT)}: {target}")
    assert not broken


# The section of the presets page that holds each algorithm's results table.
RESULTS_SECTIONS = {"ppo": "## Results", "pqn": "## PQN", "dqn": "## DQN"}


def test_presets_results_tables_match_the_presets_records():
    # `rltui envs` reads presets.toml; each algorithm's table on the presets page must say the same.
    from rltui.config import presets
    from trainers.envs import SUPPORTED_ENVS

    page = read(DOCS / "presets.md")
    for algo, heading in RESULTS_SECTIONS.items():
        section = page.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]
        measured = [env for env in SUPPORTED_ENVS if presets.result(algo, env) is not None]
        rows = {cells[1].strip(): cells for cells in (line.split("|") for line in section.splitlines())
                if len(cells) > 8 and cells[1].strip() in measured}
        for env in measured:
            result = presets.result(algo, env)
            steps, wall, mean, worst = (cells.strip() for cells in rows[env][3:7])
            assert (steps, wall, float(mean), float(worst)) == (
                result.steps_label, f"{result.wall_seconds:g} s", result.mean, result.min), (algo, env)


def test_each_algorithms_section_names_its_live_keys_and_its_defaults():
    """The algorithms page describes each algorithm by hand: its section names every live key
    the algorithm reads and each default it declares, so that a new key or default cannot
    leave the page stale."""
    from rltui.config.toml_text import show_setting
    from trainers.algorithms import ALGORITHMS
    from trainers.hparams import ALGO_HPARAMS

    page = read(DOCS / "algorithms.md")
    for name, algorithm in ALGORITHMS.items():
        heading = f"\n## {name.upper()}\n"
        assert heading in page, name
        section = " ".join(page.split(heading, 1)[1].split("\n## ", 1)[0].split())
        assert [key for key in ALGO_HPARAMS[name] if f"`{key}`" not in section] == [], name
        for key, value in algorithm.defaults.items():
            said = re.search(rf"`{key} = ([^`]+)`", section)
            assert said is not None, (name, key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert float(said.group(1)) == value, (name, key)
            else:
                assert said.group(1).strip('"') == show_setting(value), (name, key)


def test_every_metric_is_on_the_run_directory_and_dashboard_pages():
    """metrics.jsonl's fields are listed by hand on the run directory page, the sparklines
    on the dashboard's: every declared metric (and sparkline) is there."""
    from trainers import metrics_spec

    spans = set(re.findall(r"`([^`]+)`", read(DOCS / "run-directory.md")))
    assert [name for name in metrics_spec.METRIC_NAMES if name not in spans] == []
    (sparklines,) = [item for item in read(DOCS / "dashboard.md").split("\n- ") if item.startswith("**Sparklines**")]
    sparklines = " ".join(sparklines.split())
    assert [spec.title for spec in metrics_spec.SPARKLINE_METRICS if spec.title not in sparklines] == []


def test_exit_code_table_lists_every_exit_code():
    from rltui.errors import ExitCode

    page = (DOCS / "command-line.md").read_text(encoding="utf-8")
    cells = [line.split("|")[1].strip() for line in page.splitlines() if line.startswith("| ")]
    rows = {int(cell) for cell in cells if cell.isdigit()}
    assert rows == {int(code) for code in ExitCode}


def test_command_line_page_lists_every_command():
    from rltui.cli import build_parser

    page = (DOCS / "command-line.md").read_text(encoding="utf-8")
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    assert [c for c in commands if f"rltui {c}" not in page] == []



def test_command_line_synopsis_lists_every_option_of_every_command():
    from rltui.cli import build_parser

    block = read(DOCS / "command-line.md").split("```")[1]
    synopsis: dict[str, str] = {}
    command = None
    for line in block.splitlines():  # a command's line, and the indented lines that go on with it
        if (match := re.match(r"rltui ([a-z-]+)", line)) is not None:
            command = match.group(1)
            synopsis[command] = synopsis.get(command, "") + line
        elif line.startswith(" ") and command is not None:
            synopsis[command] += line
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    def absent(option: str, command: str) -> bool:
        return option != "--help" and not re.search(re.escape(option) + r"(?![\w-])", synopsis.get(command, ""))

    missing = {name: options for name, parser in commands.items()
               if (options := [o for a in parser._actions for o in a.option_strings
                               if o.startswith("--") and absent(o, name)])}
    assert missing == {}


def test_every_option_with_choices_and_a_default_says_its_default_in_help():
    from rltui.cli import build_parser

    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    silent = [f"{name} {a.option_strings[0]}" for name, parser in commands.items() for a in parser._actions
              if a.choices and a.default is not None and "default" not in (a.help or "")]
    assert silent == []


def test_architecture_page_names_every_module():
    """Each module and package of `trainers/` and `rltui/` has a row in the architecture
    page's tables, so a newcomer finds where a job lives."""
    page = read(DOCS / "architecture.md")
    named = set(re.findall(r"`([\w./]+)`", page))
    missing = []
    for package in ("trainers", "rltui"):
        for path in sorted((ROOT / package).iterdir()):
            if path.suffix == ".py" and path.name != "__init__.py":
                name = path.name
            elif path.is_dir() and (path / "__init__.py").exists():
                name = f"{path.name}/"
            else:
                continue
            if name not in named and f"{package}/{name}" not in named:
                missing.append(f"{package}/{name}")
    assert missing == []


def test_run_directory_page_describes_every_run_file():
    """Every name `rltui.runfiles.names` declares (a run's files and folders) is on the run
    directory's page, in code, as a whole name."""
    from rltui.runfiles import names

    spans = re.findall(r"`([^`]+)`", read(DOCS / "run-directory.md"))
    declared = {key: value for key, value in vars(names).items() if key.isupper()}

    def on_page(name: str) -> bool:
        whole = (r"(?<!\w)" if name[0].isalnum() else "") + re.escape(name) + (r"(?!\w)" if name[-1].isalnum() else "")
        return any(re.search(whole, span) for span in spans)

    assert declared and [key for key, name in declared.items() if not on_page(name)] == []


def test_sweep_examples_are_quoted_for_the_shell():
    """`--sweep lr=loguniform(1e-4,1e-2)` unquoted is a syntax error in bash (and a list one in
    zsh): every example in the pages, the README and `rltui launch --help` is quoted."""
    from rltui.cli import build_parser

    launch = next(a for a in build_parser()._actions if a.dest == "command").choices["launch"]
    texts = {path.name: read(path) for path in [ROOT / "README.md", *DOCS.glob("*.md")]}
    texts["rltui launch --help"] = launch.format_help()
    unquoted = {name: found for name, text in texts.items()
                if (found := re.findall(r"--sweep\s+[^\s\"'][^\s`]*[(\[]\S*", text))}
    assert unquoted == {}


def test_an_unset_default_reads_unset_as_toml_has_no_none():
    from rltui.commands.launch import _keys_epilog

    epilog = _keys_epilog()
    assert "None" not in epilog
    (line,) = [line for line in epilog.splitlines() if line.strip().startswith("stop_at_eval_return ")]
    assert line.endswith("unset = never (default: unset)")
    (row,) = [row for row in read(DOCS / "configuration.md").splitlines() if row.startswith("| `stop_at_eval_return`")]
    assert "| unset |" in row and "None" not in row and "(the default)" not in row


def test_every_picture_is_shown_by_a_page():
    # A picture no page links to is left over (the before/after pictures of a change, say).
    linked = {(source.parent / target).resolve() for source in [ROOT / "README.md", *DOCS.glob("*.md")]
              for target in re.findall(r"\]\(([^)\s#]+\.(?:svg|png|gif))\)", read(source))}
    pictures = [p for p in [*DOCS.glob("*.*"), *(DOCS / "images").glob("*.*")] if p.suffix in (".svg", ".png", ".gif")]
    assert sorted(str(p.relative_to(ROOT)) for p in pictures if p.resolve() not in linked) == []
    # and each says what it shows, not how the code was before a change
    captions = [alt for source in [ROOT / "README.md", *DOCS.glob("*.md")]
                for alt in re.findall(r"!\[([^]]*)\]", read(source))]
    assert [alt for alt in captions if re.match(r"(before|after)\b", alt, flags=re.IGNORECASE)] == []
