"""The per-object diff: only changed fields, located by their path; secrets never shown."""

from __future__ import annotations

import copy
from typing import Any

from infercrane_pulumi.config.rules import parse_stack_config
from infercrane_pulumi.objects import workloads
from infercrane_pulumi.objects.manifests import Manifest, to_yaml
from infercrane_pulumi.review.yamldiff import SECRET_SIG, SIG_KEY, diff_objects
from tests.unit import samples

CONFIG = parse_stack_config(samples.kubernetes(), [samples.replica()])
DEPLOYMENT, SERVICE = workloads.stack_objects(CONFIG)


# The context lines that locate a change inside the runtime container.
CONTAINER_PATH = " spec:\n   template:\n     spec:\n       containers:\n       - name: runtime\n"


def container(obj: Manifest) -> dict[str, Any]:
    container: dict[str, Any] = obj["spec"]["template"]["spec"]["containers"][0]
    return container


def test_equal_objects_have_no_diff() -> None:
    assert diff_objects(DEPLOYMENT, copy.deepcopy(DEPLOYMENT)) == ""
    assert diff_objects(None, None) == ""


def test_a_scalar_change_shows_its_path_and_nothing_else() -> None:
    changed = copy.deepcopy(DEPLOYMENT)
    changed["spec"]["progressDeadlineSeconds"] = 600
    assert diff_objects(DEPLOYMENT, changed) == (
        " spec:\n-  progressDeadlineSeconds: 2400\n+  progressDeadlineSeconds: 600\n"
    )


def test_an_argv_change_keeps_the_container_name_and_the_other_entries_as_context() -> None:
    changed = copy.deepcopy(DEPLOYMENT)
    container(changed)["args"] = [*container(DEPLOYMENT)["args"], "--enforce-eager"]
    context = "".join(f"         - {arg}\n" for arg in container(DEPLOYMENT)["args"])
    assert diff_objects(DEPLOYMENT, changed) == (
        CONTAINER_PATH
        + "         args:\n"
        + context.replace("- 8000", "- '8000'")
        + "+        - --enforce-eager\n"
    )


def test_items_merged_by_name_show_only_the_changed_item() -> None:
    changed = copy.deepcopy(DEPLOYMENT)
    container(changed)["env"].append({"name": "HF_HOME", "value": "/cache"})
    container(changed)["ports"][0]["containerPort"] = 9000
    assert diff_objects(DEPLOYMENT, changed) == (
        CONTAINER_PATH
        + (
            "         env:\n"
            "+        - name: HF_HOME\n"
            "+          value: /cache\n"
            "         ports:\n"
            "         - name: http\n"
            "-          containerPort: 8000\n"
            "+          containerPort: 9000\n"
        )
    )


def test_a_reordered_named_list_is_diffed_whole_so_the_move_shows() -> None:
    changed = copy.deepcopy(DEPLOYMENT)
    container(changed)["env"].reverse()
    item = (
        "{}        - name: {}\n"
        "{}          valueFrom:\n"
        "{}            secretKeyRef:\n"
        "{}              key: api-key\n"
        "{}              name: infercrane-worker\n"
    )
    assert diff_objects(DEPLOYMENT, changed) == (
        CONTAINER_PATH
        + "         env:\n"
        + item.format("+", "VLLM_API_KEY", *"++++")
        + item.format(" ", "INFERCRANE_WORKER_API_KEY", *"    ")
        + item.format("-", "VLLM_API_KEY", *"----")
    )


def test_a_created_object_is_all_additions_and_a_deleted_one_all_removals() -> None:
    text = to_yaml([SERVICE])
    assert diff_objects(None, SERVICE) == "".join(f"+{line}\n" for line in text.splitlines())
    assert diff_objects(SERVICE, None) == "".join(f"-{line}\n" for line in text.splitlines())


def test_secret_objects_and_engine_secret_strings_read_secret_and_internal_keys_vanish() -> None:
    old, new = copy.deepcopy(SERVICE), copy.deepcopy(SERVICE)
    old["metadata"]["annotations"]["token"] = {SIG_KEY: SECRET_SIG, "value": samples.SECRET_VALUE}
    old["__inputs"] = {"anything": 1}
    new["metadata"]["annotations"]["token"] = {SIG_KEY: SECRET_SIG, "ciphertext": "v1:other"}
    new["metadata"]["annotations"]["plain"] = "[secret]"
    new["__initialApiVersion"] = "v1"
    # Both tokens read [secret]: equal, so not shown; the engine's "[secret]" string is a value.
    assert diff_objects(old, new) == " metadata:\n   annotations:\n+    plain: '[secret]'\n"
    created = diff_objects(None, old)
    assert samples.SECRET_VALUE not in created
    assert "+    token: '[secret]'\n" in created
    assert "__inputs" not in created
