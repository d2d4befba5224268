from __future__ import annotations

from pathlib import Path

import pytest

import aleph
from aleph import CommandPolicy, CommandRule, CommandVerdict, ConfigError, load_config
from aleph._config import CommandPolicyConfig
from aleph._floor._analysis import Command, Limits
from aleph._plugins._loader import PluginManager

from .command_corpus import ALL, CWD, HOME, PROTECTED, REFERENCE, Case

HARDLINE_SAMPLES = [
    ":(){ :|:& };:",
    "dd if=/dev/zero of=/dev/sda",
    "mkfs.ext4 /dev/sdb1",
    "rm --no-preserve-root -rf /",
    "rm -rf /",
    "rm -rf /*",
    "rm -r /",
    "rm --recursive /",
    "echo > /dev/loop0",
    "wipefs -a /dev/sda",
    "blkdiscard /dev/nvme0n1",
    "shred /dev/sda",
    "echo x >> ~/.bashrc",
]


def policy(**kwargs: object) -> CommandPolicy:
    return CommandPolicy(home=Path(HOME), protected_paths=PROTECTED, **kwargs)  # type: ignore[arg-type]


def check(p: CommandPolicy, command: str) -> CommandVerdict:
    return p.check(command, cwd=Path(CWD))


def from_toml(tmp_path: Path, text: str) -> CommandPolicyConfig:
    path = tmp_path / "aleph.toml"
    path.write_text(text)
    return load_config(path, env={}, user_file=False).sandbox.command_policy


def test_corpus_has_at_least_200_cases_without_duplicates() -> None:
    commands = [command for command, _, _ in ALL]
    assert len(commands) >= 200
    assert sorted(set(commands)) == sorted(commands)


@pytest.mark.parametrize(("command", "expected", "rule"), ALL, ids=[repr(c[0])[:60] for c in ALL])
def test_corpus_case(command: str, expected: str, rule: str | None) -> None:
    verdict = check(policy(), command)
    assert (expected, True) == (verdict.action, rule is None or rule in verdict.rules), verdict.reason


@pytest.mark.parametrize("enforcement", ["block", "warn", "off"])
@pytest.mark.parametrize("command", HARDLINE_SAMPLES)
def test_hardline_blocks_under_every_enforcement_mode(command: str, enforcement: str) -> None:
    assert "block" == check(policy(enforcement=enforcement), command).action


@pytest.mark.parametrize("command", HARDLINE_SAMPLES)
def test_hardline_blocks_with_the_policy_disabled(command: str) -> None:
    assert "block" == check(policy(enabled=False), command).action


def test_block_reason_names_the_rules_and_the_first_description() -> None:
    verdict = check(policy(), "rm -rf / ; dd if=/dev/zero of=/dev/sda")
    assert verdict.reason.startswith("blocked by command policy [rm_rf_root, dd_to_block_device]: recursive delete")
    assert ("rm_rf_root", "dd_to_block_device") == verdict.rules
    assert ("rm", "dd") == verdict.programs


def test_verdict_lists_every_program_and_each_subcommand_decision() -> None:
    verdict = check(policy(), "git status && timeout 5 rm -rf /etc/foo | head")
    assert ("git", "timeout", "rm", "head") == verdict.programs
    decisions = {(c.program, c.action) for c in verdict.commands}
    assert {("git", "allow"), ("timeout", "allow"), ("rm", "warn"), ("head", "allow")} == decisions
    wrapped = next(c for c in verdict.commands if c.program == "rm")
    assert ("timeout",) == wrapped.via
    assert {"action": "warn", "rules": ["rm_rf_system_path"], "reason": verdict.reason} | {
        "programs": ["git", "timeout", "rm", "head"]
    } == verdict.to_json()


def test_allow_has_empty_reason_and_no_rules() -> None:
    verdict = check(policy(), "ls -la")
    assert ("allow", (), "", ("ls",)) == (verdict.action, verdict.rules, verdict.reason, verdict.programs)
    assert verdict.allowed


def test_ask_wins_over_warn_and_block_wins_over_ask() -> None:
    assert "ask" == check(policy(), "rm -rf /etc/foo; $x").action
    assert "block" == check(policy(), "$x; rm -rf /").action


# -- configuration ----------------------------------------------------------------------------


def test_default_config_warns_on_the_reference_tunable_rules(tmp_path: Path) -> None:
    p = CommandPolicy.from_config(CommandPolicyConfig(), home=Path(HOME))
    for command, expected, rule in REFERENCE:
        verdict = check(p, command)
        assert (expected, True) == (verdict.action, rule is None or rule in verdict.rules)


def test_an_empty_table_gives_the_defaults(tmp_path: Path) -> None:
    config = from_toml(tmp_path, "[sandbox.command_policy]\n")
    assert CommandPolicyConfig() == config
    p = CommandPolicy.from_config(config, home=Path(HOME))
    assert "ask" == check(p, "curl x | bash").action


def test_disabled_keeps_hardline_and_guards_only(tmp_path: Path) -> None:
    config = from_toml(tmp_path, "[sandbox.command_policy]\nenabled = false\n")
    p = CommandPolicy.from_config(config, home=Path(HOME))
    assert "allow" == check(p, "curl x | bash").action
    assert "allow" == check(p, "sudo ls").action
    assert "block" == check(p, "rm -rf /").action
    assert "ask" == check(p, "$cmd").action


def test_enforcement_warn_turns_tunable_block_and_ask_into_warn(tmp_path: Path) -> None:
    config = from_toml(
        tmp_path,
        '[sandbox.command_policy]\nenforcement = "warn"\n'
        '[[sandbox.command_policy.custom_rules]]\nname = "no_push"\nregex = "^git push"\n',
    )
    assert "warn" == config.enforcement
    p = CommandPolicy.from_config(config, home=Path(HOME))
    verdict = check(p, "git push origin main")
    assert ("warn", ("no_push",)) == (verdict.action, verdict.rules)
    assert verdict.reason == "command policy warning [no_push]: custom rule 'no_push'"
    assert "warn" == check(p, "sudo ls").action
    assert "block" == check(p, "rm -rf ~").action


def test_enforcement_off_skips_tunable_rules_but_not_hardline(tmp_path: Path) -> None:
    config = from_toml(tmp_path, '[sandbox.command_policy]\nenforcement = "off"\n')
    p = CommandPolicy.from_config(config, home=Path(HOME))
    assert ("allow", ()) == (check(p, "rm -rf /etc/foo").action, check(p, "rm -rf /etc/foo").rules)
    assert "block" == check(p, "rm -rf /").action
    assert "ask" == check(p, "eval $x").action


def test_use_default_rules_false_drops_only_the_defaults(tmp_path: Path) -> None:
    config = from_toml(tmp_path, "[sandbox.command_policy]\nuse_default_rules = false\n")
    p = CommandPolicy.from_config(config, home=Path(HOME))
    assert "allow" == check(p, "curl x | sh").action
    assert "block" == check(p, "dd if=x of=/dev/sda").action


def test_custom_regex_rule_blocks_with_its_description(tmp_path: Path) -> None:
    config = from_toml(
        tmp_path,
        "[[sandbox.command_policy.custom_rules]]\n"
        'name = "no_force_push"\nregex = "git push .*--force"\ndescription = "force pushes rewrite history"\n',
    )
    p = CommandPolicy.from_config(config, home=Path(HOME))
    verdict = check(p, "cd repo && GIT_TRACE=1 git push origin main --force")
    assert "block" == verdict.action
    assert "blocked by command policy [no_force_push]: force pushes rewrite history" == verdict.reason
    assert "allow" == check(p, "git push origin main").action


def test_custom_regex_rule_sees_through_quotes_and_wrappers(tmp_path: Path) -> None:
    p = policy(rules=[CommandRule("no_kubectl_delete", regex=r"^kubectl delete\b")])
    for command in ("kubectl delete pod x", "k'u'bectl delete pod x", "timeout 9 kubectl delete ns y"):
        assert "block" == check(p, command).action
    assert "allow" == check(p, "echo kubectl delete").action


def test_structured_rule_matches_program_basename_and_all_args() -> None:
    rule = CommandRule("no_force_push", program="git", args=("push", "--force"), action="ask")
    p = policy(rules=[rule])
    assert "ask" == check(p, "/usr/bin/git push --force origin").action
    assert "ask" == check(p, "bash -c 'git push origin --force'").action
    assert "allow" == check(p, "git push origin").action
    assert "allow" == check(p, "echo git push --force").action


def test_ask_action_custom_rule_asks(tmp_path: Path) -> None:
    config = from_toml(
        tmp_path,
        '[[sandbox.command_policy.custom_rules]]\nname = "deploys"\nprogram = "terraform"\n'
        'args = ["apply"]\naction = "ask"\n',
    )
    verdict = check(CommandPolicy.from_config(config, home=Path(HOME)), "terraform apply -auto-approve")
    assert ("ask", ("deploys",)) == (verdict.action, verdict.rules)


def test_a_bad_regex_is_a_config_error_naming_the_rule(tmp_path: Path) -> None:
    config = from_toml(tmp_path, '[[sandbox.command_policy.custom_rules]]\nname = "broken"\nregex = "(unclosed"\n')
    with pytest.raises(ConfigError) as info:
        CommandPolicy.from_config(config)
    assert str(info.value).startswith("sandbox.command_policy.custom_rules: rule 'broken': bad regex")


def test_a_rule_without_regex_or_program_is_a_config_error(tmp_path: Path) -> None:
    config = from_toml(tmp_path, '[[sandbox.command_policy.custom_rules]]\nname = "empty"\n')
    with pytest.raises(ConfigError, match=r"custom_rules: rule 'empty': set regex or program"):
        CommandPolicy.from_config(config)


def test_a_custom_rule_cannot_take_a_builtin_name(tmp_path: Path) -> None:
    config = from_toml(tmp_path, '[[sandbox.command_policy.custom_rules]]\nname = "rm_rf_root"\nregex = "x"\n')
    with pytest.raises(ConfigError, match="rule 'rm_rf_root': the name is already used by a built-in rule"):
        CommandPolicy.from_config(config)


def test_a_custom_rule_defined_twice_is_a_config_error(tmp_path: Path) -> None:
    rule = '[[sandbox.command_policy.custom_rules]]\nname = "twice"\nregex = "x"\n'
    with pytest.raises(ConfigError, match="rule 'twice': defined twice"):
        CommandPolicy.from_config(from_toml(tmp_path, rule + rule))


def test_command_rule_validation_names_the_rule() -> None:
    with pytest.raises(ValueError, match="rule 'r': bad regex"):
        CommandRule("r", regex="[")
    with pytest.raises(ValueError, match="rule 'r': args needs program"):
        CommandRule("r", regex="x", args=("y",))
    with pytest.raises(ValueError, match="rule 'r': program must be a basename"):
        CommandRule("r", program="/usr/bin/git")
    assert "custom rule 'r'" == CommandRule("r", regex="x").description


def test_plugin_rules_only_add_restrictions() -> None:
    extra = [CommandRule("plugin_no_npm_publish", program="npm", args=("publish",))]
    p = CommandPolicy.from_config(CommandPolicyConfig(), extra_rules=extra, home=Path(HOME))
    assert "block" == check(p, "npm publish").action
    assert "block" == check(p, "rm -rf /").action
    with pytest.raises(ValueError, match="rule 'rm_rf_root'"):
        CommandPolicy(rules=[CommandRule("rm_rf_root", regex="x")])
    with pytest.raises(TypeError, match=r"must be aleph\.CommandRule instances, got dict"):
        CommandPolicy(rules=[{"name": "x", "regex": "y"}])  # type: ignore[list-item]


class _NoPublishPlugin:
    @aleph.hookimpl
    def aleph_command_policy_rules(self, register: object) -> None:
        assert callable(register)
        register(CommandRule("no_npm_publish", program="npm", args=("publish",), description="publishing is manual"))


def test_plugin_rules_arrive_through_the_hook() -> None:
    manager = PluginManager(strict=True)
    assert manager.add(_NoPublishPlugin(), "nopublish")
    rules: list[CommandRule] = []
    manager.call_each("aleph_command_policy_rules", register=rules.append)
    p = CommandPolicy.from_config(CommandPolicyConfig(), extra_rules=rules, home=Path(HOME))
    verdict = check(p, "timeout 60 npm publish --access public")
    assert ("block", "blocked by command policy [no_npm_publish]: publishing is manual") == (
        verdict.action,
        verdict.reason,
    )


# -- paths ------------------------------------------------------------------------------------


def test_protected_paths_accept_tilde_and_relative_targets_resolve_against_cwd(tmp_path: Path) -> None:
    p = CommandPolicy(home=Path(HOME), protected_paths=["~/secrets"])
    assert "block" == p.check("echo x > ../secrets/a", cwd=Path(HOME) / "work").action
    assert "allow" == p.check("echo x > secrets/a", cwd=Path(HOME) / "work").action


def test_a_repeated_command_is_judged_for_the_cwd_and_stdin_it_is_given_each_time(tmp_path: Path) -> None:
    # Short commands are remembered: the same text from another directory, or with another stdin, is judged anew.
    p = CommandPolicy(home=Path(HOME), protected_paths=["~/secrets"])
    command = "echo x > secrets/a"
    assert ["allow", "block", "allow"] == [p.check(command, cwd=Path(HOME) / d).action for d in ("work", "", "work")]
    assert ["allow", "block"] == [p.check("bash", stdin=s).action for s in ("echo hi", "rm -rf ~")]
    long = f"echo {'x' * 5000} > ../secrets/a"  # past the remembered size: judged every time, the same way
    assert ["block", "block"] == [p.check(long, cwd=Path(HOME) / "work").action for _ in range(2)]


def test_without_cwd_relative_git_hook_writes_block_and_rc_names_ask() -> None:
    p = policy()
    assert "block" == p.check("echo x > .git/hooks/pre-commit").action
    assert "ask" == p.check("echo x >> .bashrc").action
    assert "allow" == p.check("echo x > out.txt").action


def test_stdin_of_a_shell_is_analysed_as_a_script() -> None:
    p = policy()
    assert "block" == p.check("bash", stdin="echo hi\nrm -rf /\n").action
    assert "allow" == p.check("bash -s", stdin="ls -la\n").action
    assert "allow" == p.check("cat", stdin="rm -rf /\n").action


def test_simple_commands_lists_what_runs_or_none_when_unknowable() -> None:
    p = policy()
    assert (("git", "status"), ("timeout", "5", "ls"), ("ls",)) == p.simple_commands("git status && timeout 5 ls")
    assert (("rm", "-rf", "build"),) == p.simple_commands("/bin/r''m -rf build")
    assert p.simple_commands("eval $x") is None
    assert p.simple_commands("ls $DIR") is None
    assert p.simple_commands("echo 'x") is None


# -- budget -----------------------------------------------------------------------------------


def test_too_many_subcommands_blocks() -> None:
    verdict = check(policy(), "true;" * 1_500)
    assert ("block", ("analysis_budget",)) == (verdict.action, verdict.rules)
    assert "too complex to analyse" in verdict.reason


def test_too_deep_nesting_blocks_without_recursion_error() -> None:
    deep = "$(" * 5_000 + "ls" + ")" * 5_000
    assert "block" == check(policy(), f"echo {deep}").action
    assert "block" == check(policy(), "( " * 5_000 + "ls" + " )" * 5_000).action
    assert "block" == check(policy(), "{ " * 5_000 + "ls;" + " }" * 5_000).action
    assert "block" == check(policy(), "eval " * 40 + "ls").action
    assert "allow" == check(policy(), "eval " * 5 + "ls").action


@pytest.mark.parametrize(
    "command",
    [
        "echo " + "${" * 3_000 + "x" + "}" * 3_000,
        "echo " + "$((" * 3_000 + "1" + "))" * 3_000,
        "echo " + '"$(' * 3_000 + "ls" + ')"' * 3_000,
        "echo " + "`" * 3_001,
    ],
    ids=["parameter", "arithmetic", "quoted-substitution", "unbalanced-backquotes"],
)
def test_deep_nesting_of_every_kind_blocks_or_asks_without_crashing(command: str) -> None:
    assert check(policy(), command).action in ("block", "ask")


@pytest.mark.parametrize(
    "command",
    [
        "a[ " * 80_000,
        "echo " + "[" * 250_000,
        "chmod +" + "w" * 250_000 + "! /",
        "awk '" + "print" * 50_000 + "'",
        "python -c '" + "while " * 40_000 + "'",
        "echo " + "{" * 200_000,
        "rm -rf " + "x " * 120_000,
    ],
    ids=["assign-subscripts", "brackets", "chmod-mode", "awk-print", "fork-regex", "braces", "many-args"],
)
def test_adversarial_inputs_near_the_size_limit_finish(command: str) -> None:
    # these inputs made earlier regexes and loops quadratic; they must come back (any verdict)
    assert check(policy(), command).action in ("allow", "warn", "ask", "block")


def test_brace_explosion_blocks() -> None:
    assert "block" == check(policy(), "echo " + "{a,b}" * 30).action
    assert "block" == check(policy(), "echo {1..100000000}").action


def test_a_one_megabyte_command_is_blocked_within_bounds() -> None:
    verdict = check(policy(), "echo " + "a" * 1_048_576)
    assert ("block", ("analysis_budget",)) == (verdict.action, verdict.rules)


def test_a_large_heredoc_within_the_limit_is_analysed() -> None:
    body = "rm -rf /\n" * 20_000
    assert "allow" == check(policy(), f"cat <<'EOF' > notes.txt\n{body}EOF\n").action


def test_custom_limits_are_honoured() -> None:
    p = CommandPolicy(home=Path(HOME), limits=Limits(max_commands=3))
    assert "allow" == p.check("a; b; c").action
    assert "block" == p.check("a; b; c; d").action


def test_corpus_cases_are_well_formed() -> None:
    actions = {"allow", "warn", "ask", "block"}
    bad: list[Case] = [case for case in ALL if case[1] not in actions]
    assert [] == bad


# -- words agree with bash --------------------------------------------------------------------

WORDS = [
    "r''m",
    '"r"m',
    "\\rm",
    "r\\m",
    "$'\\x72m'",
    "$'\\162\\155'",
    "$'a\\tb'",
    "$'\\u0072m'",
    "{rm,-rf,/}",
    "x{a,b}y",
    "{a,b}{1,2}",
    "{1..4}",
    "{a..c}",
    "{a,{b,c}}",
    "'{a,b}'",
    "{a}",
    "a,b",
    "~",
    "~/x",
    "x~",
    '"~"',
    "r\\\nm",
    "'r\\\nm'",
    '"a\\"b"',
    "'a\"b'",
    '"a\\$b"',
    "a\\ b",
    "''",
    '""',
    "-rf",
    "--no-preserve-root",
    "$'\\''",
    '"$HOME/x"',
    "${HOME}",
    "{a,b",
    "a}",
    "{,a}",
    "{a..e..2}",
    "$'\\x4'",
    "\"$'x'\"",
    "'$(x)'",
    "\\$\\(x\\)",
    '$"x"',
    '{"a",b}',
    "{'a,b',c}",
    "{1..3}x",
    "x\\{a,b\\}",
    "$'\\e[0m'",
    "{a,b}\\ c",
    "a{b,c{d,e}f}g",
    "{-1..2}",
    "{3..1}",
    "{a,b,}",
    "${HOME}x",
    "$'\\x72'm",
    '"{a,b}"',
    "{a\\,b,c}",
    "{a,b\\}",
    "{01..03}",
    "{x..z..-1}",
]


def test_word_normalisation_agrees_with_bash(tmp_path: Path) -> None:
    import shutil
    import subprocess

    from aleph._floor._analysis import analyse

    bash = shutil.which("bash")
    assert bash is not None, "bash is needed to compare word expansion"
    home = str(tmp_path)
    for word in WORDS:
        # printf is a builtin and the words hold no substitutions, so nothing but printf runs
        out = subprocess.run(
            [bash, "--norc", "--noprofile", "-c", f"printf '%s\\0' {word}"],
            capture_output=True,
            env={"HOME": home, "PATH": "/usr/bin:/bin"},
            check=True,
        ).stdout.decode()
        expected = out.split("\0")[:-1]
        commands = analyse(f"printf '%s\\0' {word}", home=home).commands
        assert [expected] == [[a.text for a in commands[0].args[1:]]], word


# -- the commands bash would run are the commands the analyser sees -----------------------------

RUNS_RM = [
    "printf 'rm -rf /' > s.sh; bash s.sh",
    "echo 'rm -rf /' > s.sh && sh < s.sh",
    "cat > s.sh <<'E'\nrm -rf /\nE\nsource s.sh",
    "ls; rm -rf /",
    "true && rm -rf /x",
    "false || rm -r /y",
    "echo $(rm -rf /)",
    'echo "$(rm -f a)"',
    "echo `rm -rf b`",
    "cat <(rm -rf /)",
    "echo ${x:-$(rm -rf c)}",
    "echo $((1 + $(rm -rf d; echo 1)))",
    "{rm,-rf,/}",
    "rm${IFS}-rf${IFS}/",
    "$'\\x72m' -rf /",
    "r''m -rf /",
    '"r"m -r"f" "/"',
    "\\rm -rf /",
    "rm -rf \\\n /",
    'env -S "rm -rf /"',
    "env -i PATH=$PATH rm -rf /",
    "timeout 5 rm -rf /",
    "nice -n 10 rm -rf /",
    "nohup rm -rf / 2>/dev/null",
    "stdbuf -oL rm -rf /",
    "echo / | xargs rm -rf",
    "find . -maxdepth 0 -exec rm -rf {} \\;",
    "bash -c 'rm -rf /'",
    "sh -c 'rm -rf /'",
    "bash <<EOF\nrm -rf /\nEOF",
    'bash <<< "rm -rf /"',
    "cat <<EOF\n$(rm -rf /)\nEOF",
    "echo 'rm -rf /' | bash",
    "eval 'rm -rf /'",
    "(rm -rf /)",
    "{ rm -rf /; }",
    "if true; then rm -rf /; fi",
    "for d in a; do rm -rf $d; done",
    "case x in x) rm -rf /;; esac",
    "[[ -n $(rm -rf /) ]]",
    "f() { rm -rf /; }; f",
    "a[$(rm -rf /)]=1",
    "coproc rm -rf /",
    "time rm -rf /",
    "! rm -rf /",
    "command rm -rf /",
    "builtin eval rm -rf /",
    "exec rm -rf /",
    "echo x;rm -rf /",
    "echo x&&rm -rf /",
    "echo x|rm -rf /",
    "echo \"a\" 'b' $'c'; rm -rf /",
    "x=1 rm -rf /",
    "a=$(rm -rf /)",
    "echo $( (rm -rf /) )",
    'echo "$( echo ")" ; rm -rf / )"',
    "echo $(echo '(' ) ; rm -rf /",
    "cat <<'E'\n$(x)\nE\nrm -rf /",
    "cat <<-E\n\tx\n\tE\nrm -rf /",
    "{ echo; } && rm -rf /",
    "while false; do :; done; rm -rf /",
    "until true; do :; done && rm -rf /",
    "echo ${#x}; rm -rf /",
    "echo $#; rm -rf /",
    "echo $'\\''; rm -rf /",
    'echo "it\'s"; rm -rf /',
    "echo '\"'; rm -rf /",
    '[ -z "" ] && rm -rf /',
    "(( 1 )) && rm -rf /",
    "echo $(( (1+2) )) && rm -rf /",
    "for ((i=0;i<1;i++)); do rm -rf /; done",
    "echo a\\\nb; rm -rf /",
    'echo "a\nb"; rm -rf /',
    "echo $(cat <<EOF\nx\nEOF\n); rm -rf /",
    "echo x # ; comment\nrm -rf /",
    "echo x >/dev/null 2>&1 </dev/null; rm -rf /",
    "echo ${x/a/b}; rm -rf /",
    'echo ${x:-"}"}; rm -rf /',
    "rm -rf / &",
    "echo x |& rm -rf /",
    "echo $(echo $(echo $(rm -rf /)))",
    "echo `echo \\`rm -rf /\\``",
]


HIDES_RM = [
    "bash < <(echo 'rm -rf /')",
    "exec 3<<<'rm -rf /'; bash <&3",
    "bash 3<<<'rm -rf /' /dev/fd/3",
    "cat a.sh >> s.sh; echo 'rm -rf /' >> s.sh; bash s.sh",
    "x=rm; $x -rf /",
    '"${x:-rm}" -rf /',
    "$(echo rm) -rf /",
    "echo cm0gLXJmIC8= | base64 -d | bash",
    "tr a-z a-z <<< 'rm -rf /' | bash",
    "printf '%s' 'rm -rf /' | bash",
    "echo 'rm -rf /' | tr a a | bash",
    'bash -c "$(echo rm -rf /)"',
    'eval "$(echo rm -rf /)"',
    "a=r; b=m; $a$b -rf /",
    'set -- rm -rf /; "$@"',
    "shopt -s expand_aliases; alias x=rm\nx -rf /",
    'c=(rm -rf /); "${c[@]}"',
    "read -r c <<< 'rm'; $c -rf /",
    "printf -v c rm; $c -rf /",
    "BASH_ENV=<(echo 'rm -rf /') bash -c true",
    "sed -n '1e rm -rf /' <<< x",
    "echo x | sed 's/x/rm -rf \\//e'",
    "x='a[$(rm -rf /)]'; echo $(( x ))",
    "x='a[$(rm -rf /)]'; (( x ))",
    "declare -i x; x='a[$(rm -rf /)]'",
    "IFS=x; y=rmx-rfx/; $y",
]
"""Commands where bash runs rm but the analyser cannot see it statically: the floor must still ask or block."""


def _seen(argv: list[str], seen: list[Command]) -> bool:
    # an argument the analyser cannot know (xargs input, find's {}) stands for whatever bash passed
    return any(
        c.program == argv[0] and ([a.text for a in c.args] == argv[1:] or any(not a.literal or a.glob for a in c.args))
        for c in seen
    )


def _stubbed_bash(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A PATH where rm and ls are recording stubs and the wrappers are the real programs."""
    import os
    import shutil

    stubs = tmp_path / "bin"
    stubs.mkdir()
    log = tmp_path / "log"
    log.mkdir()
    # rm and ls are harmless stubs that record their arguments, one file per run (stubs run concurrently
    # in pipelines and process substitutions); the wrappers are the real programs
    for name in ("rm", "ls", "cat"):
        stub = stubs / name
        stub.write_text(f'#!/bin/sh\nprintf "%s\\0" "$0" "$@" > {log}/$$\n')
        stub.chmod(0o755)
    real_programs = ("env", "timeout", "nice", "nohup", "stdbuf", "xargs", "find", "bash", "sh", "true", "false")
    for name in (*real_programs, "base64", "tr", "sed"):
        real = shutil.which(name, path="/usr/bin:/bin")
        assert real is not None, f"{name} is needed for this test"
        os.symlink(real, stubs / name)
    work = tmp_path / "work"
    work.mkdir()
    return stubs, log, work


def _run_stubbed(command: str, tmp_path: Path, stubs: Path, log: Path, work: Path) -> list[list[str]]:
    """Run ``command`` under the stubbed PATH; the argument lists the stubs recorded."""
    import os
    import subprocess

    for entry in log.iterdir():
        entry.unlink()
    subprocess.run(
        [str(stubs / "bash"), "--norc", "--noprofile", "-c", command],
        cwd=work,
        env={"PATH": str(stubs), "HOME": str(tmp_path)},
        capture_output=True,
        timeout=30,
        check=False,
    )
    ran = [entry.read_text().split("\0")[:-1] for entry in log.iterdir()]
    return [[os.path.basename(argv[0]), *argv[1:]] for argv in ran]


def test_every_command_bash_runs_is_seen_by_the_analyser(tmp_path: Path) -> None:
    from aleph._floor._analysis import analyse

    stubs, log, work = _stubbed_bash(tmp_path)
    for command in RUNS_RM:
        ran = _run_stubbed(command, tmp_path, stubs, log, work)
        assert ran, f"bash ran no stub for {command!r}"
        seen = analyse(command, home=str(tmp_path), cwd=str(work)).commands

        missing = [argv for argv in ran if not _seen(argv, seen) and argv[0] != "cat"]
        assert [] == missing, f"{command!r}: bash ran {missing}, the analyser saw {[c.text for c in seen]}"


def test_rm_hidden_from_static_analysis_still_asks_or_blocks(tmp_path: Path) -> None:
    stubs, log, work = _stubbed_bash(tmp_path)
    p = CommandPolicy(home=tmp_path)
    for command in HIDES_RM:
        assert ["rm", "-rf", "/"] in _run_stubbed(command, tmp_path, stubs, log, work), command
        assert p.check(command, cwd=work).action in ("ask", "block"), command
