"""Shared test helpers and fixtures.

Checkpoint fixtures (tests/interp/sources/test_checkpoints.py): tiny random GPT-NeoX checkpoints saved with
``save_pretrained``, a byte-level tokenizer folder, and a Hugging Face hub cache built on disk in
the hub's own layout (``models--ORG--NAME/{blobs,refs,snapshots}``) so the hub code path runs
offline. Other modules may append their own fixtures below; these are self-contained.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
from filelock import FileLock

TINY_REPO = "EleutherAI/pythia-14m-seed3"


def save_tiny_neox(
    directory: str | Path,
    seed: int = 0,
    d_model: int = 32,
    n_layers: int = 2,
    n_heads: int = 4,
    d_vocab: int = 256,
    n_ctx: int = 64,
    safetensors: bool = True,
) -> Path:
    """Save a random GPT-NeoX (Pythia architecture: rotary on 25 % of head dims, parallel
    residual, untied embeddings) with ``save_pretrained``; returns ``directory``."""
    from transformers import GPTNeoXForCausalLM

    from interp.sources.catalogue import neox_config

    config = neox_config(d_model, n_layers, n_heads, d_vocab, n_ctx)
    torch.manual_seed(seed)
    model = GPTNeoXForCausalLM(config).eval()
    directory = Path(directory)
    model.save_pretrained(directory)
    if not safetensors:  # transformers 5 always writes safetensors: convert to a pickle checkpoint
        from safetensors.torch import load_file

        weights = directory / "model.safetensors"
        torch.save(load_file(weights), directory / "pytorch_model.bin")
        weights.unlink()
    return directory


def save_byte_tokenizer(directory: str | Path) -> Path:
    """Save :func:`interp.sources.make_byte_tokenizer` into ``directory``."""
    from interp.sources import make_byte_tokenizer

    make_byte_tokenizer().save_pretrained(directory)
    return Path(directory)


def add_hub_revision(cache_dir: Path, repo_id: str, revision: str, files: dict[str, Path]) -> str:
    """Put ``files`` (name in repo -> file on disk) into a hub cache as branch ``revision``.

    Layout as huggingface_hub writes it: blobs named by sha256 (the LFS oid), one snapshot folder
    per commit whose entries are relative symlinks to the blobs, ``refs/{revision}`` holding the
    commit sha (40 hex, no newline). Returns the commit sha.
    """
    repo = cache_dir / ("models--" + repo_id.replace("/", "--"))
    for sub in ("blobs", "refs", "snapshots"):
        (repo / sub).mkdir(parents=True, exist_ok=True)
    digests = {}
    for name, src in sorted(files.items()):
        digest = hashlib.sha256(Path(src).read_bytes()).hexdigest()
        blob = repo / "blobs" / digest
        if not blob.exists():
            shutil.copyfile(src, blob)
        digests[name] = digest
    commit = hashlib.sha1(f"{revision}:{sorted(digests.items())}".encode()).hexdigest()
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, digest in digests.items():
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(repo / "blobs" / digest, link.parent), link)
    (repo / "refs" / revision).write_text(commit)
    return commit


#: Fixtures whose work is cached per process but shared across modules: their users run on one
#: pytest-xdist worker, so the work is done once (each notebook executes once, not once per worker).
SHARED_ACROSS_MODULES = {"notebook_runs": "notebooks"}
#: Where each group's tests live: the test files (by name, wherever they sit in tests/) whose tests
#: `make test` keeps on one worker, and the group of each. Checked against the fixtures at
#: collection (:func:`shared_work_group`).
WORKER_GROUPS = {
    "test_notebooks.py": "notebooks",
    "test_report_browser.py": "notebooks",
    **{
        f"{module}.py": module
        for module in (
            "test_checkpoints",
            "test_contrast_stats",
            "test_damaged_store",
            "test_local_layouts",
            "test_decomposition",
            "test_download",
            "test_embedded_training",
            "test_gqa_run",
            "test_errors_catalogue",
            "test_families",
            "test_main_job",
            "test_patching",
            "test_patching_families",
            "test_patching_ideal",
            "test_patching_targets",
            "test_patching_kv_heads",
            "test_population_insight",
            "test_ranking",
            "test_scrubber",
            "test_main_job_units",
            "test_sweeps",
            "test_synth_interventions",
            "test_synth_training",
            "test_task_library",
            "test_timeline",
            "test_tasks",
            "test_train_loop",
            "test_weight_swap",
            "test_zoom",
        )
    },
}


def shared_work_group(item: pytest.Item) -> str | None:
    """The group of a test that shares an expensive fixture with others, or None.

    A test module's own module- or session-scoped fixture (a trained run, a report) is computed
    once per worker process, so its users belong on one pytest-xdist worker: in the group named
    after the module; users of a :data:`SHARED_ACROSS_MODULES` fixture share that fixture's group.
    Before this, both workers built e.g. test_train_loop's 28 s ``digests`` and executed each
    notebook twice. A module whose shared fixture is cheap beside its tests sets
    ``SPREAD_OVER_WORKERS = True`` to keep its tests on both workers (test_docs: a few seconds of
    fixture, minutes of tests).
    """
    # Private on purpose: pytest offers no public way to ask, at collection, where a fixture is
    # defined and with which scope (``item._fixtureinfo.name2fixturedefs`` is what pytest's own
    # ``--fixtures-per-test`` reads); tests/project/test_worker_groups.py fails if a pytest release moves it.
    names = set(item.fixturenames)
    for fixture, group in SHARED_ACROSS_MODULES.items():
        if fixture in names:
            return group
    module = getattr(item, "module", None)
    if module is None or getattr(module, "SPREAD_OVER_WORKERS", False):
        return None
    for name in names:
        for fixturedef in item._fixtureinfo.name2fixturedefs.get(name, ()):
            if fixturedef.scope in ("module", "session") and fixturedef.func.__module__ == module.__name__:
                return module.__name__
    return None


#: Fixtures whose users are ``slow`` (``make test-fast`` runs ``-m "not slow"`` and leaves them
#: out): the embedded quick suite (trained by the session on a clean checkout: minutes on 2 cores),
#: the executed notebooks, and a test module's own fixtures that train or build for long
#: (``"test_x.py::name"``). Other slow tests carry the marker themselves (``@pytest.mark.slow``,
#: or ``pytestmark = pytest.mark.slow`` for a whole file).
SLOW_FIXTURES = {
    "quick_suite",
    "notebook_runs",
    "test_train_loop.py::digests",  # every training path's digests: ~30 s on an idle machine
    "test_sweeps.py::reference",  # a real 4-run sweep on two joblib workers
    "test_main_job_units.py::reference",  # a main-job study over four sources
    "test_synth_training.py::plain_run",  # a run trained to the floor
    "test_synth_training.py::bias_run",
}


def _fixture_keys(item: pytest.Item):
    """The fixtures a test uses, directly or through others: ``name`` for this conftest's,
    ``"test_x.py::name"`` for a test module's own."""
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        for fixturedef in info.name2fixturedefs.get(name, ()) if info is not None else ():
            module = fixturedef.func.__module__.rsplit(".", 1)[-1]
            yield name if module == "conftest" else f"{module}.py::{name}"


#: Seconds a long fixture (:data:`SLOW_FIXTURES`) may go without progress before it fails
#: (tests/progress_watchdog.py): the quick suite's folder gains a checkpoint every 100 steps (3.3 s
#: on 2 idle cores: 2400 steps in 79 s, 2026-12-06; 600 s is 180x that); the others' CPU time grows
#: while they work.
#: pytest-timeout's wall-clock limit (`make test`: --timeout=900) counts only the test function
#: (``timeout_func_only`` in pyproject.toml), never this fixture work: at load 12-19 the suite's
#: training took more than 1800 s and the old limit failed every test of its worker (issue 71).
FIXTURE_STALL_SECONDS = 600


def mark_slow(items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test that uses a :data:`SLOW_FIXTURES` fixture, directly or through another."""
    for item in items:
        if SLOW_FIXTURES & set(_fixture_keys(item)):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """Set up each :data:`SLOW_FIXTURES` fixture but the quick suite (which watches its own folder)
    under a :func:`progress_watchdog` on the CPU time of this process and its children: it fails
    after :data:`FIXTURE_STALL_SECONDS` without any, never because the machine is slow."""
    module = fixturedef.func.__module__.rsplit(".", 1)[-1]
    key = fixturedef.argname if module == "conftest" else f"{module}.py::{fixturedef.argname}"
    if key not in SLOW_FIXTURES or key == "quick_suite":
        return (yield)
    from progress_watchdog import cpu_probe, progress_watchdog

    with progress_watchdog(cpu_probe, FIXTURE_STALL_SECONDS, f"fixture {key}"):
        return (yield)


def worker_group(nodeid: str) -> str | None:
    """The :data:`WORKER_GROUPS` group of a test id (``tests/interp/test_x.py::test_y[...]``), or None.

    Keyed by the file's name alone: a test file's name is unique in the tree (pytest imports each
    under its bare name in its default "prepend" import mode, and refuses two files of one name)."""
    return WORKER_GROUPS.get(nodeid.split("::", 1)[0].rsplit("/", 1)[-1])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark the users of :data:`SLOW_FIXTURES` slow; check that :data:`WORKER_GROUPS` keeps every
    test that shares work (:func:`shared_work_group`) in its group, and collect the notebooks' group first: at ~5 minutes it is the longest unit a
    worker takes, and should not come last. (Under xdist the scheduler sends the groups with the
    most tests first, in collection order among equals, then the single tests.)

    Raises:
        pytest.UsageError: a test shares a fixture's work but its file is not in its group.
    """
    mark_slow(items)  # before the `-m "not slow"` selection, which runs after this hook
    for item in items:
        group = shared_work_group(item)
        if group is not None and worker_group(item.nodeid) != group:
            raise pytest.UsageError(
                f"{item.nodeid} shares work with the tests of group {group!r} (its fixtures), but its file is "
                f"in group {worker_group(item.nodeid)!r}: add it to WORKER_GROUPS in tests/conftest.py"
            )
    first = set(SHARED_ACROSS_MODULES.values())
    items.sort(key=lambda item: worker_group(item.nodeid) not in first)  # stable: the rest keep their order


def pytest_xdist_make_scheduler(config, log):
    """``--dist loadgroup`` (``make test``): :func:`worker_group_scheduling`; None (pytest-xdist's
    own choice) for every other ``--dist``."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return worker_group_scheduling(config, log)


def worker_group_scheduling(config, log=None):
    """A pytest-xdist scheduler that sends the tests of a :data:`WORKER_GROUPS` group to one
    worker as one unit and schedules every other test on its own, as ``--dist load`` does.

    pytest-xdist 3.8 reads ``xdist_group`` marks into the test ids, which pytest 9.2's structured
    ids no longer allow (pytest-dev/pytest-xdist#1386: its loadgroup silently stops grouping);
    this scheduler groups by the file part of the id instead, which both keep. It overrides
    ``LoadScopeScheduling._split_scope``, pytest-xdist's one documented-in-code extension point
    for ``--dist loadscope``/``loadfile``/``loadgroup`` (no public hook takes a grouping key);
    tests/project/test_worker_groups.py checks the grouping on the installed pytest-xdist.
    """
    from xdist.scheduler import LoadScopeScheduling

    class WorkerGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid) or nodeid

    return WorkerGroupScheduling(config, log)


@pytest.fixture(autouse=True)
def _browser_closed_after_each_test():
    """Shut down the headless Chromium a test's page visits shared (tests/browser.py), so no
    playwright driver, and no event loop it marks as running, outlives the test."""
    yield
    for name in ("browser", "tests.browser"):  # imported either way, each is its own module
        if name in sys.modules:
            sys.modules[name].shut_down()


@pytest.fixture(autouse=True)
def _kept_evaluations_forgotten():
    """Each test starts with an empty store of kept evaluations (interp.core.kept): a test that
    counts checkpoint loads sees its own, not another test's answers on the same weights."""
    from interp.core.kept import KEPT

    KEPT.clear()
    yield


@pytest.fixture
def one_torch_thread():
    """One torch thread for the test (the value training runs use; restored afterwards)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def byte_tokenizer_dir(tmp_path_factory) -> Path:
    """A saved byte-level tokenizer (256 tokens, id = byte value)."""
    return save_byte_tokenizer(tmp_path_factory.mktemp("byte_tokenizer"))


@pytest.fixture(scope="session")
def tiny_hub_cache(tmp_path_factory, byte_tokenizer_dir) -> dict:
    """A hub cache holding ``EleutherAI/pythia-14m-seed3`` at step0, step1, step2 (step1's
    weights again, as the hub serves duplicated weights on some branches) and step4 (pickle
    weights only). Returns {"cache_dir", "repo_id", "commits", "models"} (models: step -> the
    saved checkpoint folder)."""
    root = tmp_path_factory.mktemp("hub")
    cache_dir = root / "cache"
    models = {
        0: save_tiny_neox(root / "m0", seed=0),
        1: save_tiny_neox(root / "m1", seed=1),
        4: save_tiny_neox(root / "m4", seed=4, safetensors=False),
    }
    models[2] = models[1]
    tokenizer_files = {p.name: p for p in byte_tokenizer_dir.iterdir()}
    commits = {}
    for step, folder in sorted(models.items()):
        files = {p.name: p for p in folder.iterdir() if p.is_file()}
        commits[step] = add_hub_revision(cache_dir, TINY_REPO, f"step{step}", {**files, **tokenizer_files})
    return {"cache_dir": cache_dir, "repo_id": TINY_REPO, "commits": commits, "models": models}


@pytest.fixture(scope="session")
def tiny_local_suite(tmp_path_factory):
    """A local suite of three random tiny GPT-NeoX checkpoints (steps 0, 100, 200) and a tokenizer."""
    root = tmp_path_factory.mktemp("suite")
    for seed, step in enumerate([0, 100, 200]):
        save_tiny_neox(root / f"step{step}", seed=seed)
    save_byte_tokenizer(root / "tokenizer")
    return root


@pytest.fixture
def hub_offline(monkeypatch):
    """``HF_HUB_OFFLINE=1`` for this test: the env var and huggingface_hub's import-time constant."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def load_analysis(name: str):
    """The reproduction module ``analyses.<name>`` (a package: ``python -m analyses.<name>``)."""
    import importlib

    return importlib.import_module(f"analyses.{name}")


# ----------------------------------------------------------------------------- other families
# Tiny OLMo-2- and GPT-2-shaped hub caches with step-named revisions (tests/interp/sources/test_families.py).

OLMO2_REPO = "allenai/OLMo-2-0425-1B"
GPT2_REPO = "emergence-lens/gpt2-tiny-steps"


def save_tiny_olmo2(
    directory: str | Path,
    seed: int = 0,
    d_model: int = 32,
    n_layers: int = 2,
    n_heads: int = 4,
    d_vocab: int = 256,
    n_ctx: int = 64,
) -> Path:
    """Save a random OLMo-2 (sequential blocks, RMSNorm after attention and after the MLP,
    QK-norm, rotary, SwiGLU MLP) with ``save_pretrained``; returns ``directory``."""
    from transformers import Olmo2Config, Olmo2ForCausalLM

    config = Olmo2Config(
        vocab_size=d_vocab,
        hidden_size=d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        num_key_value_heads=n_heads,
        intermediate_size=2 * d_model,
        max_position_embeddings=n_ctx,
        tie_word_embeddings=False,
        pad_token_id=None,
        bos_token_id=None,
        eos_token_id=None,
    )
    torch.manual_seed(seed)
    Olmo2ForCausalLM(config).eval().save_pretrained(directory)
    return Path(directory)


def save_tiny_gpt2(
    directory: str | Path,
    seed: int = 0,
    d_model: int = 32,
    n_layers: int = 2,
    n_heads: int = 4,
    d_vocab: int = 256,
    n_ctx: int = 64,
) -> Path:
    """Save a random GPT-2 (sequential pre-LayerNorm blocks, learned positions, tied
    embeddings) with ``save_pretrained``; returns ``directory``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=d_vocab,
        n_embd=d_model,
        n_layer=n_layers,
        n_head=n_heads,
        n_positions=n_ctx,
        bos_token_id=None,
        eos_token_id=None,
    )
    torch.manual_seed(seed)
    GPT2LMHeadModel(config).eval().save_pretrained(directory)
    return Path(directory)


def build_hub_cache(cache_dir: Path, repo_id: str, revisions: dict[str, Path], tokenizer_dir: Path) -> dict[str, str]:
    """Put one saved checkpoint folder per branch name into a hub cache (:func:`add_hub_revision`),
    each with the tokenizer files; returns ``{branch: commit}``."""
    tokenizer_files = {p.name: p for p in Path(tokenizer_dir).iterdir()}
    return {
        name: add_hub_revision(
            cache_dir, repo_id, name, {**{p.name: p for p in folder.iterdir() if p.is_file()}, **tokenizer_files}
        )
        for name, folder in revisions.items()
    }


@pytest.fixture(scope="session")
def olmo2_hub_cache(tmp_path_factory, byte_tokenizer_dir) -> dict:
    """A hub cache holding a tiny OLMo-2-shaped ``allenai/OLMo-2-0425-1B``: stage-1 branches at
    steps 0, 1000, 2000, 4000, 5000 (3000 missing from the regular grid; step 2000 serves the
    final step 5000's weights) plus ``main`` (the final weights), and two stage-2 ingredient-1
    branches at steps 0 and 1000 (other weights). Returns {"cache_dir", "repo_id", "models"}
    (models: branch name -> saved checkpoint folder)."""
    root = tmp_path_factory.mktemp("olmo2_hub")
    final = save_tiny_olmo2(root / "s5000", seed=5)
    models = {
        "stage1-step0-tokens0B": save_tiny_olmo2(root / "s0", seed=0),
        "stage1-step1000-tokens5B": save_tiny_olmo2(root / "s1000", seed=1),
        "stage1-step2000-tokens9B": final,
        "stage1-step4000-tokens17B": save_tiny_olmo2(root / "s4000", seed=4),
        "stage1-step5000-tokens21B": final,
        "stage2-ingredient1-step0-tokens0B": save_tiny_olmo2(root / "i0", seed=10),
        "stage2-ingredient1-step1000-tokens4B": save_tiny_olmo2(root / "i1000", seed=11),
        "main": final,
    }
    cache_dir = root / "cache"
    build_hub_cache(cache_dir, OLMO2_REPO, models, byte_tokenizer_dir)
    return {"cache_dir": cache_dir, "repo_id": OLMO2_REPO, "models": models}


@pytest.fixture(scope="session")
def gpt2_hub_cache(tmp_path_factory, byte_tokenizer_dir) -> dict:
    """A hub cache holding a tiny GPT-2-shaped ``emergence-lens/gpt2-tiny-steps`` with branches
    ``step{N}-tokens{M}`` (a count of tokens, 2048 per step) at steps 0, 100, 200, 400, 500
    (300 missing; step 400 serves step 100's weights; no ``main``, so neither label is known
    right). Returns {"cache_dir", "repo_id", "models"} (branch name -> checkpoint folder)."""
    root = tmp_path_factory.mktemp("gpt2_hub")
    models = {
        f"step{step}-tokens{2048 * step}": save_tiny_gpt2(root / f"g{step}", seed=step) for step in (0, 100, 200, 500)
    }
    models["step400-tokens819200"] = models["step100-tokens204800"]
    cache_dir = root / "cache"
    build_hub_cache(cache_dir, GPT2_REPO, models, byte_tokenizer_dir)
    return {"cache_dir": cache_dir, "repo_id": GPT2_REPO, "models": models}


@pytest.fixture
def hub_cache_env(monkeypatch):
    """Point huggingface_hub (env vars and import-time constants) at a cache, offline: call it
    with the cache folder."""
    from huggingface_hub import constants

    def use(cache_dir: Path) -> None:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        monkeypatch.setenv("HF_HUB_CACHE", str(cache_dir))
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache_dir))

    return use


@pytest.fixture(scope="session")
def quick_suite(tmp_path_factory):
    """The embedded quick suite, trained once per session: ``(run folders, cache root)``.

    EMERGENCE_LENS_TEST_CACHE lets a developer reuse a trained quick suite between runs; CI leaves
    it unset, so the suite is trained from scratch by the code under test.
    """
    from interp.sources import embedded

    reuse = os.environ.get("EMERGENCE_LENS_TEST_CACHE")
    if reuse:
        root = Path(reuse)
    elif os.environ.get("PYTEST_XDIST_WORKER"):
        # pytest-xdist (`make test` runs two workers): the workers share one suite, trained by
        # the first to ask for it while the others wait on the lock.
        root = tmp_path_factory.getbasetemp().parent / "quick-suite-cache"
    else:
        root = tmp_path_factory.mktemp("cache")
    root.mkdir(parents=True, exist_ok=True)
    from progress_watchdog import folder_probe, progress_watchdog

    # No wall-clock limit (pytest-timeout counts the test function only): training on a loaded
    # machine may take as long as it takes, as long as checkpoints keep appearing in the folder;
    # a worker waiting on the lock watches the same folder fill.
    watch = progress_watchdog(folder_probe(root), FIXTURE_STALL_SECONDS, f"training the quick suite in {root}")
    with watch, FileLock(str(root) + ".lock"):
        return embedded.ensure_suite(embedded.QUICK, root=root, progress=False), root


NOTEBOOKS = Path(__file__).resolve().parents[1] / "analyses" / "notebooks"
#: Per-cell limit when the tests execute a notebook at CI scale (seconds).
NOTEBOOK_CELL_TIMEOUT = 300
#: A PolyPythia id under which the offline hub cache holds an embedded run (a stand-in: the
#: weights are the embedded run's, laid out as the hub serves Pythia's checkpoints).
STAND_IN_HUB_ID = "EleutherAI/pythia-14m-seed7"


def execute_notebook(name: str, out_dir: Path, env: dict[str, str], probe: str | None = None):
    """Execute ``analyses/notebooks/<name>.ipynb`` in a fresh kernel of this interpreter with
    ``env`` added to the environment; a ``probe`` cell (test-only code) is appended when given.

    Writes ``out_dir/<name>.ipynb`` (executed) and returns the executed notebook. Raises
    nbclient's ``CellExecutionError`` on the first failing cell.
    """
    import json
    import sys

    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    if probe is not None:
        nb.cells.append(nbformat.v4.new_code_cell(probe, metadata={"tags": ["test-probe"]}))
    # A kernel spec for this interpreter, so the kernel imports the package under test.
    spec_dir = out_dir / "kernels" / "emergence-lens-test"
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "emergence-lens (tests)",
                "language": "python",
            }
        )
    )
    kernel_env = {
        **os.environ,
        "EMERGENCE_LENS_NOTEBOOK_SCALE": "ci",
        "OMP_NUM_THREADS": "1",
        "JUPYTER_PATH": str(out_dir),
        **env,
    }
    previous = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(out_dir)  # read by the kernel-spec lookup in this process
    try:
        client = NotebookClient(
            nb,
            timeout=NOTEBOOK_CELL_TIMEOUT,
            startup_timeout=120,
            kernel_name="emergence-lens-test",
            resources={"metadata": {"path": str(NOTEBOOKS.parents[1])}},
        )
        client.execute(env=kernel_env)
    finally:
        if previous is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = previous
    nbformat.write(nb, out_dir / f"{name}.ipynb")
    return nb


def execute_cells_twice(cells: list[str], tmp_path: Path):
    """Run ``cells`` in a fresh kernel of this interpreter (the repository and tests/ importable),
    then every cell but the first a second time (its new output replaces the first, as in
    Jupyter); returns the executed notebook."""
    import json

    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in cells]
    spec_dir = tmp_path / "kernels" / "emergence-lens-test"
    spec_dir.mkdir(parents=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "emergence-lens (tests)",
                "language": "python",
            }
        )
    )
    repo = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "JUPYTER_PATH": str(tmp_path),
        "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "tests"), os.environ.get("PYTHONPATH", "")]),
    }
    previous = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(tmp_path)
    try:
        client = NotebookClient(
            nb,
            timeout=300,
            startup_timeout=120,
            kernel_name="emergence-lens-test",
            resources={"metadata": {"path": str(repo)}},
        )
        with client.setup_kernel(env=env):
            for index, cell in enumerate(nb.cells):
                client.execute_cell(cell, index)
            for index in range(1, len(nb.cells)):
                client.execute_cell(nb.cells[index], index)
    finally:
        if previous is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = previous
    return nb


def pythia_layout_cache(run_folder: Path, repo_id: str, cache_dir: Path) -> list[int]:
    """Copy an embedded run's checkpoints into a Hugging Face hub cache under ``repo_id``, one
    branch ``step{N}`` per step that Pythia's schedule also has (weights, config and the
    tokenizer files in each, as on the hub). Returns those steps."""
    from interp.sources import PYTHIA_STEPS, LocalSuiteSource

    source = LocalSuiteSource(run_folder)
    steps = sorted(set(source.available_steps()) & set(PYTHIA_STEPS))
    tokenizer_files = {p.name: p for p in (run_folder / "tokenizer").iterdir() if p.is_file()}
    for step in steps:
        files = {p.name: p for p in (run_folder / f"step{step}").iterdir() if p.is_file()}
        add_hub_revision(cache_dir, repo_id, f"step{step}", {**files, **tokenizer_files})
    return steps


@pytest.fixture(scope="session")
def notebook_runs(quick_suite, tmp_path_factory):
    """Executes each notebook at most once per session: ``notebook_runs(name)`` ->
    (executed notebook, its output folder, extra facts such as the hub cache's steps)."""
    done: dict[str, tuple] = {}

    def run(name: str):
        if name in done:
            return done[name]
        _, root = quick_suite
        out = tmp_path_factory.mktemp(f"notebook-{name}")
        env = {"EMERGENCE_LENS_CACHE": str(root), "EMERGENCE_LENS_NOTEBOOK_OUT": str(out / "results")}
        facts: dict = {}
        probe = None
        if name == "hub_pythia":
            facts = _hub_cache_for_notebook(quick_suite[0], out / "hf-cache")
            env.update(
                {"HF_HUB_CACHE": str(out / "hf-cache"), "HF_HUB_OFFLINE": "1", "EMERGENCE_LENS_HUB_ID": STAND_IN_HUB_ID}
            )
        if name == "synthetic":
            probe = (
                "import json\nprint(json.dumps({label: {**r.summary, 'bare_alignment_max': "
                "float(alignment_without_bias(r).max())} for label, r in runs.items()}))"
            )
        done[name] = (execute_notebook(name, out, env, probe=probe), out, facts)
        return done[name]

    return run


def _hub_cache_for_notebook(run_folders: list[Path], cache_dir: Path) -> dict:
    """Lay out the first quick-suite run that has emerged by the last step it shares with Pythia's
    schedule; returns {"run": folder, "steps": [...], "accuracy": {step: accuracy}}."""
    from interp.sources import PYTHIA_STEPS, LocalSuiteSource
    from interp.tasks import RepetitionTask, evaluate

    seen = {}
    for folder in run_folders:
        source = LocalSuiteSource(folder)
        steps = sorted(set(source.available_steps()) & set(PYTHIA_STEPS))
        batch = RepetitionTask().build(source.tokenizer())
        accuracy = {s: evaluate(source.load(s).model, batch).accuracy for s in steps}
        source.close()
        seen[folder.name] = accuracy
        if accuracy[steps[-1]] >= 0.5 and accuracy[steps[0]] < 0.5:
            pythia_layout_cache(folder, STAND_IN_HUB_ID, cache_dir)
            return {"run": folder, "steps": steps, "accuracy": accuracy}
    pytest.fail(
        f"no quick-suite run has accuracy >= 0.5 at the last step it shares with Pythia's schedule "
        f"(accuracy per step: {seen}); the offline hub notebook needs one that emerged"
    )
