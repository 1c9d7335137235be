"""Every ``hermes-editor`` command has a test through the real entry point.

The parser is walked (subcommands, and the choices of a positional action such as ``pairing
approve``); each command path must have a row in COVERED naming the test that runs it. The named
test must exist, mention the command's last word as a string (or its module must, in the helper
that runs the command), and live in a module that starts
the installed ``hermes-editor`` (or ``python -m hermes_cli``) in a subprocess, itself or through
a helper module under tests/. A new command without a row fails here, naming the command.
"""

from __future__ import annotations

import argparse
import ast
import functools
from pathlib import Path

import pytest

from hermes_cli.__main__ import _parser

ROOT = Path(__file__).resolve().parents[2]

# Command path -> "test file::test function" that runs it through the installed entry point.
COVERED: dict[str, str] = {
    "setup": "tests/hermes_cli/test_setup.py::test_openai_compatible_server_asks_a_key_and_offers_its_models",
    "doctor": "tests/hermes_cli/test_cli.py::test_doctor_with_a_reachable_model_passes",
    "demo": "tests/hermes_cli/test_demo.py::test_the_scripted_model_runs_unattended_and_says_what_is_temporary",
    "chat": "tests/hermes_cli/test_chat.py::test_one_shot_prints_the_streamed_reply_and_exits_0",
    "model": "tests/hermes_cli/test_model_cmd.py::test_setting_a_model_edits_only_that_key",
    "sessions": "tests/hermes_cli/test_cli.py::test_version_help_and_empty_history",
    "sessions list": "tests/hermes_cli/test_json_listings.py::test_sessions_list_and_search_as_json",
    "sessions search": "tests/hermes_cli/test_learning_cli.py::test_sessions_search_show_and_export",
    "sessions show": "tests/hermes_cli/test_learning_cli.py::test_sessions_search_show_and_export",
    "sessions export": "tests/hermes_cli/test_learning_cli.py::test_sessions_search_show_and_export",
    "sessions rename": "tests/hermes_cli/test_sessions_cmd.py::test_rename_by_unique_prefix_and_ambiguous_prefix",
    "sessions delete": "tests/hermes_cli/test_sessions_cmd.py::test_delete_one_session_removes_messages_search_hits_and_checkpoints",
    "sessions stats": "tests/hermes_cli/test_sessions_cmd.py::test_stats_counts_sessions_messages_and_surfaces",
    "search": "tests/hermes_cli/test_sessions_cmd.py::test_top_level_search_takes_the_filters_and_json_of_sessions_search",
    "skills": "tests/hermes_cli/test_json_listings.py::test_pairing_skills_and_memory_as_json",
    "skills list": "tests/hermes_cli/test_learning_cli.py::test_skills_list_and_prune_asks_before_acting",
    "skills show": "tests/hermes_cli/test_learning_cli.py::test_skills_show_prints_one_skill",
    "skills approve": "tests/core/test_learning_screening.py::test_the_user_keeps_lines_they_wrote_by_hand_with_approve",
    "skills prune": "tests/hermes_cli/test_learning_cli.py::test_skills_list_and_prune_asks_before_acting",
    "skills search": "tests/hermes_cli/test_skills_hub.py::test_git_source_search_install_refuse_update_pin_remove",
    "skills install": "tests/hermes_cli/test_skills_hub.py::test_git_source_search_install_refuse_update_pin_remove",
    "skills update": "tests/hermes_cli/test_skills_hub.py::test_git_source_search_install_refuse_update_pin_remove",
    "skills remove": "tests/hermes_cli/test_skills_hub.py::test_git_source_search_install_refuse_update_pin_remove",
    "skills pin": "tests/hermes_cli/test_skills_hub.py::test_git_source_search_install_refuse_update_pin_remove",
    "skills unpin": "tests/hermes_cli/test_skills_hub.py::test_git_source_search_install_refuse_update_pin_remove",
    "skills curate": "tests/core/test_curator_job.py::test_a_memory_file_near_its_budget_twice_gets_a_consolidation_applied_with_a_backup",
    "skills proposals": "tests/core/test_curator_job.py::test_a_memory_file_near_its_budget_twice_gets_a_consolidation_applied_with_a_backup",
    "skills apply-proposal": "tests/core/test_curator_job.py::test_a_memory_file_near_its_budget_twice_gets_a_consolidation_applied_with_a_backup",
    "skills reject-proposal": "tests/core/test_curator_job.py::test_a_consolidation_is_refused_when_the_file_changed_and_a_rejected_one_is_not_proposed_again",
    "memory": "tests/hermes_cli/test_learning_cli.py::test_memory_show_log_and_revert",
    "memory show": "tests/hermes_cli/test_learning_cli.py::test_memory_show_log_and_revert",
    "memory log": "tests/hermes_cli/test_learning_cli.py::test_memory_show_log_and_revert",
    "memory revert": "tests/hermes_cli/test_id_prefixes.py::test_memory_revert_takes_a_unique_prefix",
    "memory approve": "tests/core/test_learning_screening.py::test_the_user_keeps_lines_they_wrote_by_hand_with_approve",
    "import": "tests/hermes_cli/test_learning_cli.py::test_import_from_a_hermes_agent_home",
    "checkpoints": "tests/hermes_cli/test_checkpoints_cmd.py::test_checkpoints_list_by_session_prefix_and_by_default",
    "checkpoints list": "tests/hermes_cli/test_checkpoints_cmd.py::test_checkpoints_list_by_session_prefix_and_by_default",
    "checkpoints prune": "tests/hermes_cli/test_checkpoints_cmd.py::test_checkpoints_prune_keeps_recent_sessions",
    "approvals": "tests/hermes_cli/test_json_listings.py::test_approvals_list_as_json_redacts_like_the_text",
    "approvals list": "tests/hermes_cli/test_approvals_cmd.py::test_a_real_hermes_acp_question_is_listed_answered_once_and_the_second_answer_loses",
    "approvals allow": "tests/hermes_cli/test_approvals_cmd.py::test_a_real_hermes_acp_question_is_listed_answered_once_and_the_second_answer_loses",
    "approvals deny": "tests/hermes_cli/test_id_prefixes.py::test_sessions_and_approvals_list_an_ambiguous_prefix_s_candidates",
    "config": "tests/hermes_cli/test_config_cmd.py::test_show_prints_the_file_without_secrets_and_is_the_default",
    "config show": "tests/hermes_cli/test_config_cmd.py::test_show_as_json_is_the_configuration_in_effect_with_secrets_as_set_or_null",
    "config get": "tests/hermes_cli/test_config_cmd.py::test_get_prints_one_value_by_dotted_key",
    "config set": "tests/hermes_cli/test_config_cmd.py::test_set_edits_one_key_and_keeps_the_rest",
    "config path": "tests/hermes_cli/test_config_cmd.py::test_path_prints_the_config_file",
    "gateway": "tests/hermes_cli/test_json_listings.py::test_gateway_reports_its_status_by_default",
    "gateway status": "tests/hermes_gateway/test_chat.py::test_second_gateway_for_the_same_bot_exits_and_status_reports",
    "pairing": "tests/hermes_cli/test_json_listings.py::test_pairing_skills_and_memory_as_json",
    "pairing list": "tests/hermes_gateway/test_chat.py::test_pairing_approved_on_the_machine_lets_the_user_chat",
    "pairing approve": "tests/hermes_gateway/test_chat.py::test_pairing_approved_on_the_machine_lets_the_user_chat",
    "pairing reject": "tests/hermes_cli/test_id_prefixes.py::test_pairing_codes_and_users_take_unique_prefixes",
    "pairing users": "tests/hermes_gateway/test_chat.py::test_pairing_approved_on_the_machine_lets_the_user_chat",
    "pairing revoke": "tests/hermes_cli/test_id_prefixes.py::test_pairing_codes_and_users_take_unique_prefixes",
    "cron": "tests/hermes_cli/test_json_listings.py::test_cron_lists_by_default_and_as_json",
    "cron add": "tests/hermes_gateway/test_cron_without_bot.py::test_cron_add_warns_only_when_no_scheduler_runs",
    "cron list": "tests/hermes_cli/test_json_listings.py::test_cron_lists_by_default_and_as_json",
    "cron pause": "tests/hermes_cli/test_id_prefixes.py::test_cron_job_ids_take_unique_prefixes",
    "cron resume": "tests/hermes_cli/test_id_prefixes.py::test_cron_job_ids_take_unique_prefixes",
    "cron remove": "tests/hermes_cli/test_id_prefixes.py::test_cron_job_ids_take_unique_prefixes",
    "cron run": "tests/hermes_gateway/test_cron_without_bot.py::test_job_runs_without_a_bot_and_its_output_shows_in_cron_runs",
    "cron runs": "tests/hermes_gateway/test_cron_without_bot.py::test_job_runs_without_a_bot_and_its_output_shows_in_cron_runs",
    "logs": "tests/hermes_cli/test_logs_status_completion.py::test_logs_tail_merge_and_surface",
    "status": "tests/hermes_cli/test_logs_status_completion.py::test_status_plain_and_json",
    "completion": "tests/hermes_cli/test_logs_status_completion.py::test_completion_scripts_name_every_command",
    "completion bash": "tests/hermes_cli/test_logs_status_completion.py::test_completion_scripts_name_every_command",
    "completion zsh": "tests/hermes_cli/test_logs_status_completion.py::test_completion_scripts_name_every_command",
    "completion fish": "tests/hermes_cli/test_logs_status_completion.py::test_completion_scripts_name_every_command",
    "mcp": "tests/hermes_cli/test_mcp_cmd.py::test_bare_mcp_lists_nothing_configured_and_says_how_to_add_one",
    "mcp list": "tests/hermes_cli/test_mcp_cmd.py::test_list_shows_transport_and_enabled_never_secrets",
    "mcp test": "tests/hermes_cli/test_mcp_cmd.py::test_test_connects_and_lists_the_tools",
    "profiles": "tests/hermes_cli/test_profiles.py::test_create_list_and_use",
    "profiles list": "tests/hermes_cli/test_profiles.py::test_create_list_and_use",
    "profiles create": "tests/hermes_cli/test_profiles.py::test_create_list_and_use",
    "profiles remove": "tests/hermes_cli/test_profiles.py::test_remove_asks_and_moves_to_the_trash",
}

# What in a module shows that it starts the installed CLI in a process of its own.
ENTRY_POINTS = ('"hermes-editor"', "'hermes-editor'", '"hermes_cli"')


def command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[str]:
    """Every command path: each subcommand, and each choice of a positional argument (an action word)."""
    found: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(" ".join((*prefix, name)))
                found += command_paths(sub, (*prefix, name))
        elif prefix and not action.option_strings and action.choices:
            found += [" ".join((*prefix, str(choice))) for choice in action.choices]
    return found


@functools.cache
def _source(relative: str) -> str:
    return (ROOT / relative).read_text(encoding="utf-8")


def _function(relative: str, name: str) -> str | None:
    """The source of the test function ``name`` in ``relative``, or None."""
    source = _source(relative)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return ast.get_source_segment(source, node)
    return None


def _runs_the_entry_point(relative: str) -> bool:
    """Whether the module, or a tests.* module it imports from, starts hermes-editor in a subprocess."""
    source = _source(relative)
    modules = [relative]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests."):
            candidate = node.module.replace(".", "/") + ".py"
            if (ROOT / candidate).is_file():
                modules.append(candidate)
    return any("subprocess" in _source(m) and any(marker in _source(m) for marker in ENTRY_POINTS) for m in modules)


def test_every_command_has_a_row() -> None:
    paths = command_paths(_parser())
    assert len(paths) == len(set(paths))
    missing = sorted(set(paths) - set(COVERED))
    assert not missing, f"commands without a test through the entry point (add a test and a row to COVERED): {missing}"


@pytest.mark.parametrize("path", sorted(COVERED))
def test_the_named_test_runs_the_command(path: str) -> None:
    if path not in command_paths(_parser()):
        pytest.fail(f"{path!r} is no longer a command: remove its row from COVERED")
    relative, name = COVERED[path].split("::")
    assert (ROOT / relative).is_file(), f"{path}: {relative} does not exist"
    body = _function(relative, name)
    assert body is not None, f"{path}: no test {name} in {relative}"
    word = path.split()[-1]
    # The word is in the test, or in the module's own helper that runs the command (run_demo, say).
    mentions = [f'"{word}"', f"'{word}'"]
    assert any(m in body or m in _source(relative) for m in mentions), f"{path}: neither {name} nor its module mentions {word!r}"
    assert _runs_the_entry_point(relative), f"{path}: {relative} does not start hermes-editor in a subprocess"
