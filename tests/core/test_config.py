"""The config file: defaults, every key, and errors that name the key."""

from __future__ import annotations

import pytest

from bot.core.config import Config, Labels, parse_config
from bot.core.errors import UserError


@pytest.mark.parametrize("source", [None, "", "# only a comment\n", {}])
def test_no_file_means_defaults(source):
    config = parse_config(source)
    assert config == Config()
    assert (config.labels.trigger, config.variant, config.python) == ("bisect", "cu130", "3.12")
    assert config.min_permission == "triage" and config.timeout == 600


def test_every_key_is_read():
    config = parse_config("""
handle: "@my-bot"
labels: {trigger: please-bisect, found: "regression: found"}
variant: cpu
python: "3.11"
timeout: 90
index_url: https://mirror.example/whl/nightly/{variant}
min_permission: write
packages_index: https://pypi.example/simple
""")
    assert config.handle == "my-bot"
    assert config.labels == Labels(trigger="please-bisect", found="regression: found")
    assert (config.variant, config.python, config.timeout) == ("cpu", "3.11", 90)
    assert config.index_for("cpu") == "https://mirror.example/whl/nightly/cpu"
    assert config.min_permission == "write"
    assert config.packages_index == "https://pypi.example/simple"
    assert parse_config('packages_index: ""').packages_index == ""  # torch's index alone


@pytest.mark.parametrize(("text", "message"), [
    ("colour: red", "unknown key `colour`"),
    ("labels: {triggr: x}", "unknown key `triggr`"),
    ("python: 3.10", 'quoted Python version'),
    ("variant: cuda", "a variant is cpu"),
    ("timeout: 0", "`timeout`"),
    ("timeout: yes", "`timeout`"),
    ("min_permission: owner", "one of read, triage"),
    ("index_url: ftp://x", "http(s) URL"),
    ("packages_index: pypi", "URL of a package index"),
    ("labels: {found: bisect, trigger: Bisect}", "different label"),
    ("- a list", "a mapping"),
    ("handle: [x", "not valid YAML"),
    ("handle: 'not a login!'", "not a GitHub login"),
])
def test_errors_name_the_key(text, message):
    with pytest.raises(UserError, match=None) as error:
        parse_config(text)
    assert message in str(error.value) and ".github/torch-bisect-bot.yml" in str(error.value)


def test_a_key_of_an_earlier_version_is_left_out_with_a_note():
    """A config copied from the older example (`runner_labels`) must not stop every plan."""
    notes: list[str] = []
    config = parse_config("variant: cpu\nrunner_labels: [self-hosted, gpu]\n", notes=notes)
    assert config.variant == "cpu"
    assert notes == [".github/torch-bisect-bot.yml: `runner_labels` is no longer read: the GPU "
                     "runners are the workflow's `gpu-runner` and `multi-gpu-runner` inputs "
                     "(workflows/torch-bisect-bot.yml)"]
