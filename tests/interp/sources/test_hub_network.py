"""Every network failure of the hub path says what to do (issue 43, item 7).

Without a network the listing failed with ``cannot list the branches of EleutherAI/pythia-70m-seed3:
[Errno -2] Name or service not known`` and, offline, with ``has no checkpoint branches ... in the
local hub cache``: neither said what to do, and the documented ``huggingface-cli download`` is
not installed with huggingface_hub 1.0 and later (it ships ``hf``). Each is one line now that
names the repository, the cache folder and the two ways on: the network, or ``emergence download``
on another machine (``--grid 30`` for a search, ``--steps N`` for one branch) and
``HF_HUB_OFFLINE=1`` here; each is a :class:`HubUnavailableError`.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from interp.sources import CheckpointError, HubSource, HubUnavailableError

REPO = "EleutherAI/pythia-70m-seed3"
DNS = "[Errno -2] Name or service not known"


class FakeApi:
    def __init__(self, branches=None, fail=False):
        self.branches, self.fail = branches or [], fail

    def __call__(self):
        return self

    def list_repo_refs(self, repo_id):
        if self.fail:
            raise OSError(DNS)
        return SimpleNamespace(branches=[SimpleNamespace(name=n) for n in self.branches])

    def get_paths_info(self, repo_id, paths, revision=None):
        raise OSError(DNS)


@pytest.fixture
def online(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


def test_no_network_and_no_cache_says_what_to_do(tmp_path, monkeypatch, online):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi(fail=True))
    source = HubSource(REPO, cache_dir=tmp_path)
    with pytest.raises(HubUnavailableError) as error:
        source.available_steps()
    message = str(error.value)
    cache = tmp_path / "models--EleutherAI--pythia-70m-seed3"
    assert "\n" not in message
    assert message.startswith(
        f"cannot list the branches of {REPO}: the hub could not be reached (OSError: {DNS}) and the local "
        f"hub cache {cache} does not hold it; check the network"
    )
    assert f"run `emergence download {REPO} --grid 30`, copy that hub cache here (or set HF_HUB_CACHE" in message
    assert message.endswith("set HF_HUB_OFFLINE=1")


def test_a_download_or_metadata_failure_says_what_to_do(tmp_path, monkeypatch, online):
    import huggingface_hub
    import transformer_lens.model_bridge  # noqa: F401  (imported before HfApi is replaced: load imports it)
    from huggingface_hub.errors import LocalEntryNotFoundError

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi(["main", "step0", "step1000"]))

    def no_network(*args, **kwargs):
        raise LocalEntryNotFoundError(f"Got: ConnectError: {DNS}\nAn error happened while trying to locate the files")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_network)
    source = HubSource(REPO, cache_dir=tmp_path)
    assert source.available_steps() == [0, 1000]
    with pytest.raises(HubUnavailableError) as error:
        source.load(1000, device="cpu")
    message = str(error.value)
    assert "\n" not in message and message.startswith(
        f"cannot fetch branch step1000 of {REPO}: the hub could not be reached (LocalEntryNotFoundError: Got: "
        f"ConnectError: {DNS})"
    )
    assert f"run `emergence download {REPO} --steps 1000`" in message
    with pytest.raises(HubUnavailableError, match=r"^cannot read the weights' metadata of branch step0 of "):
        source.digest(0)


def test_offline_with_an_empty_cache_says_what_to_do(tmp_path, hub_offline):
    source = HubSource(REPO, cache_dir=tmp_path)
    # the first call that needs the hub says it (issue 58, item 4): the list of steps, not an empty list
    with pytest.raises(HubUnavailableError) as listing:
        source.available_steps()
    with pytest.raises(HubUnavailableError) as error:
        source.tokenizer()
    message = str(error.value)
    assert str(listing.value) == message
    assert "\n" not in message and message.startswith(
        f"{REPO} has no checkpoint branches (step{{N}}, ...) in the local hub cache "
        f"{tmp_path / 'models--EleutherAI--pythia-70m-seed3'} (HF_HUB_OFFLINE=1): fetch them with "
        f"`emergence download {REPO} --grid 30` (with HF_HUB_OFFLINE unset, or on a machine with a network"
    )


def test_the_study_passes_the_hub_error_on_as_it_is(tmp_path, hub_offline):
    """Issue 58, item 4: the main job on a hub run whose checkpoints are not cached raises the
    error that says what to fetch, not a RuntimeError telling the user to run again."""
    from interp.main_job.runner import run_study
    from interp.tasks import RepetitionTask

    source = HubSource(REPO, cache_dir=tmp_path)
    with pytest.raises(HubUnavailableError) as error:
        run_study([source], RepetitionTask(n_prompts=4, length=4), progress=False)
    message = str(error.value)
    assert message.startswith(f"{REPO} has no checkpoint branches") and "run again" not in message
    assert f"`emergence download {REPO} --grid 30`" in message


def test_offline_a_step_not_cached_says_which_download_fetches_it(tiny_hub_cache, hub_offline):
    source = HubSource(REPO.replace("70m-seed3", "14m-seed3"), cache_dir=tiny_hub_cache["cache_dir"])
    with pytest.raises(CheckpointError, match=r"no checkpoint at step 1000"):
        source.digest(1000)  # not a cached branch: the nearest are named (tests/interp/sources/test_checkpoints.py)
    import shutil

    copy = tiny_hub_cache["cache_dir"].parent / "cache_without_weights"
    if not copy.exists():  # the branches listed, their weights not fetched
        shutil.copytree(tiny_hub_cache["cache_dir"], copy, symlinks=True)
        for link in copy.glob("models--*/snapshots/*/model.safetensors"):
            link.unlink()
    source = HubSource(REPO.replace("70m-seed3", "14m-seed3"), cache_dir=copy)
    with pytest.raises(HubUnavailableError) as error:
        source.digest(1)
    assert str(error.value).startswith("EleutherAI/pythia-14m-seed3 step 1: branch step1 has no weight file in the ")
    assert str(error.value).endswith(
        f"repair: `emergence download EleutherAI/pythia-14m-seed3 --steps 1 --cache {copy}` with HF_HUB_OFFLINE unset "
        "(or on a machine with a network, then copy that hub cache here)"
    )
