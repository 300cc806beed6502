//! The README's examples, run as written.
//!
//! Every `bundle-tool` command in the README's ```` ```console ```` and ```` ```sh ```` blocks that needs
//! no cluster, no registry and no release build is run with the real binary from the repository
//! root, against the repository's own `bundle/` and `catalog/`. It must exit 0; in console
//! blocks, the lines the README shows after the command must be exactly what the command prints
//! (stdout, unless redirected, then stderr), except that a shown line ending in `...` or `…`
//! only has to be a prefix of the printed line, and `sha256:…` stands for any digest. Commands
//! that talk to a cluster (`kubectl`, `status`, `upgrade`, `approve`, `install` without
//! `--print`) or build everything (`make`) are listed, with why, in [`SKIPPED`]: the test fails
//! on a `bundle-tool` command it neither runs nor skips, so a new example cannot go untested.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Commands (by their first words) the test does not run, and why.
const SKIPPED: &[(&str, &str)] = &[
    ("bundle-tool status", "reads a cluster"),
    ("bundle-tool upgrade", "changes a cluster's Subscription"),
    ("bundle-tool approve", "changes a cluster's InstallPlan"),
    (
        "target/static/bundle-tool release",
        "the output of `make release`, run by CI's main job",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// One command of a README block: its text (continuations joined) and, in a console block, every
/// line of the block after it (the runner takes as many as the command prints: an output may
/// itself contain lines starting with `$ `, as `explain upgrade`'s does).
#[derive(Debug)]
struct Example {
    line: usize,
    command: String,
    after: Vec<String>,
    console: bool,
}

/// The blocks of `readme` that hold commands: (first line number, console?, lines). Other
/// fenced blocks (yaml, rust...) are skipped.
fn blocks(readme: &str) -> Vec<(usize, bool, Vec<String>)> {
    let mut out = Vec::new();
    // (first line, Some(console?) for a command block, lines)
    let mut open: Option<(usize, Option<bool>, Vec<String>)> = None;
    for (i, raw) in readme.lines().enumerate() {
        let line = raw.trim_end();
        if let Some(rest) = line.strip_prefix("```") {
            match open.take() {
                Some((first, Some(console), lines)) => out.push((first, console, lines)),
                Some((_, None, _)) => {}
                None => {
                    let kind = match rest {
                        "console" => Some(true),
                        "sh" => Some(false),
                        _ => None,
                    };
                    open = Some((i + 2, kind, Vec::new()));
                }
            }
            continue;
        }
        if let Some(b) = open.as_mut() {
            b.2.push(line.to_string());
        }
    }
    out
}

fn examples(readme: &str) -> Vec<Example> {
    let mut out = Vec::new();
    for (first, console, lines) in blocks(readme) {
        let mut i = 0;
        while i < lines.len() {
            let line = &lines[i];
            let start = i;
            let text = if console {
                match line.strip_prefix("$ ") {
                    Some(cmd) => cmd.to_string(),
                    None => {
                        i += 1;
                        continue;
                    }
                }
            } else {
                let t = line.trim_start();
                if t.starts_with('#') || t.is_empty() {
                    i += 1;
                    continue;
                }
                t.to_string()
            };
            let mut command = String::new();
            let mut text = text;
            while let Some(head) = text.strip_suffix('\\') {
                command.push_str(head);
                i += 1;
                text = lines
                    .get(i)
                    .map(|l| l.trim_start().to_string())
                    .unwrap_or_default();
            }
            command.push_str(&text);
            i += 1;
            out.push(Example {
                line: first + start,
                command,
                after: if console {
                    lines[i..].to_vec()
                } else {
                    Vec::new()
                },
                console,
            });
        }
    }
    out
}

/// Splits `cmd args... [> file] [# comment]` into (args, redirected stdout).
fn parse(command: &str) -> (Vec<String>, bool) {
    let command = command.split("  #").next().unwrap_or(command);
    let mut words: Vec<String> = command.split_whitespace().map(String::from).collect();
    let redirected = match words.iter().position(|w| w == ">") {
        Some(i) => {
            words.truncate(i);
            true
        }
        None => false,
    };
    (words, redirected)
}

fn line_matches(shown: &str, printed: &str) -> bool {
    let shown = shown.trim_end();
    let printed = printed.trim_end();
    if let Some(prefix) = shown
        .strip_suffix("...")
        .or_else(|| shown.strip_suffix('…'))
    {
        return printed.starts_with(prefix.trim_end());
    }
    if let Some(i) = shown.find("sha256:…") {
        let (a, b) = (&shown[..i], &shown[i + "sha256:…".len()..]);
        return printed.starts_with(a)
            && printed.ends_with(b)
            && printed.len() >= a.len() + "sha256:".len() + 64 + b.len();
    }
    shown == printed
}

fn needs_cluster(args: &[String]) -> bool {
    args.get(1).is_some_and(|c| c == "install") && !args.iter().any(|a| a == "--print")
}

#[test]
fn readme_examples_run_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let all = examples(&readme);
    let mut ran = 0;
    let mut failures = Vec::new();
    for ex in &all {
        let (args, redirected) = parse(&ex.command);
        let Some(program) = args.first() else {
            continue;
        };
        if !program.ends_with("bundle-tool") {
            continue; // make, kubectl, cargo: not bundle-tool's examples
        }
        if SKIPPED.iter().any(|(p, _)| ex.command.starts_with(p)) || needs_cluster(&args) {
            continue;
        }
        assert_eq!(
            program, "bundle-tool",
            "README line {}: call bundle-tool by name",
            ex.line
        );
        let out = Command::new(env!("CARGO_BIN_EXE_bundle-tool"))
            .args(&args[1..])
            .current_dir(root())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        ran += 1;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            failures.push(format!(
                "README line {}: `{}` exited {:?}:\n{stderr}",
                ex.line, ex.command, out.status
            ));
            continue;
        }
        if !ex.console {
            continue;
        }
        let mut printed: Vec<&str> = if redirected {
            stderr.lines().collect()
        } else {
            stdout.lines().collect()
        };
        // Trailing blank lines are not shown in a block.
        while printed.last().is_some_and(|l| l.trim().is_empty()) {
            printed.pop();
        }
        let shown = &ex.after[..printed.len().min(ex.after.len())];
        // What the README shows next must be another command or the end of the block.
        let rest_ok = ex
            .after
            .get(printed.len())
            .is_none_or(|l| l.starts_with("$ "));
        let same = rest_ok
            && shown.len() == printed.len()
            && shown.iter().zip(&printed).all(|(s, p)| line_matches(s, p));
        if !same {
            failures.push(format!(
                "README line {}: `{}` prints something else than the README shows.\n--- README\n{}\n--- printed\n{}",
                ex.line,
                ex.command,
                ex.after.join("\n"),
                printed.join("\n")
            ));
        }
    }
    assert!(ran >= 4, "only {ran} README examples found: {all:#?}");
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_example_parser_sees_commands_output_and_continuations() {
    let md = "text\n```console\n$ bundle-tool a \\\n    --b c > f\nshown 1\nshown 2\n$ kubectl x\n```\n```sh\n# comment\nbundle-tool d \\\n  e\n```\n";
    let ex = examples(md);
    assert_eq!(ex.len(), 3, "{ex:#?}");
    assert_eq!(ex[0].command, "bundle-tool a --b c > f");
    assert_eq!(ex[0].after, vec!["shown 1", "shown 2", "$ kubectl x"]);
    assert_eq!(
        parse(&ex[0].command),
        (
            vec!["bundle-tool".into(), "a".into(), "--b".into(), "c".into()],
            true
        )
    );
    assert_eq!(ex[2].command, "bundle-tool d e");
    assert!(!ex[2].console);
    assert!(line_matches("abc ...", "abc def"));
    assert!(!line_matches("abc", "abd"));
}
