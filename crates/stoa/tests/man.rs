//! `stoa man --dir DIR`: a page per command, each a roff page with its `.TH`
//! line, which groff (and man, when installed) renders without a warning.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

fn run(command: &mut Command) -> (i32, String, String) {
    let done = stoa_testkit::run(command.env_remove("RUST_LOG"), b"", RUN_TIMEOUT);
    (done.status.code().unwrap_or(-1), done.stdout, done.stderr)
}

fn installed(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok()
}

#[test]
fn a_page_per_command_that_renders() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("man1");
    let (code, _, err) = run(Command::new(env!("CARGO_BIN_EXE_stoa"))
        .args(["man", "--dir"])
        .arg(&dir));
    assert_eq!(code, 0, "{err}");
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .expect("the directory was made")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for page in [
        "stoa.1",
        "stoa-serve.1",
        "stoa-check-config.1",
        "stoa-man.1",
        "stoa-bench-mail.1",
        "stoa-bench-web.1",
        "stoa-user-alias-add.1",
        "stoa-mailbox-export.1",
    ] {
        assert!(pages.iter().any(|p| p == page), "{page} missing: {pages:?}");
    }
    // The configuration file's page goes to man5 beside man1.
    assert!(
        err.contains(&format!("wrote {} manual pages", pages.len() + 1)),
        "{err}"
    );
    for page in &pages {
        let path = dir.join(page);
        let text = std::fs::read_to_string(&path).expect("read the page");
        let name = page.trim_end_matches(".1");
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!(".TH {name} 1 "))),
            "{page}: no .TH line:\n{text}"
        );
        assert!(text.contains(".SH NAME\n"), "{page}: no NAME section");
        render(&path, name);
    }
    let serve = std::fs::read_to_string(dir.join("stoa-serve.1")).expect("read");
    assert!(
        serve.contains("/etc/stoa/stoa.toml"),
        "the default file is documented"
    );
    // Issue 56: SIGNALS, FILES and EXAMPLES, and stoa.toml(5).
    for section in ["SIGNALS", "FILES", "EXAMPLES", "SEE ALSO"] {
        assert!(
            serve.contains(&format!(".SH \"{section}\"\n"))
                || serve.contains(&format!(".SH {section}\n")),
            "stoa-serve.1 lacks {section}"
        );
    }
    let stoa = std::fs::read_to_string(dir.join("stoa.1")).expect("read");
    assert!(stoa.contains(".SH FILES\n"), "stoa.1 lacks FILES");
    let config = tmp.path().join("man5/stoa.toml.5");
    let text = std::fs::read_to_string(&config).expect("stoa.toml.5 in man5");
    assert!(text.contains(".TH STOA.TOML 5 "), "{text}");
    for needle in [".SH [[SITE]]\n", "hide_dotfiles", ".SH [METRICS]\n"] {
        assert!(text.contains(needle), "stoa.toml.5 lacks {needle}");
    }
    render(&config, "stoa.toml");
}

/// Renders `page` with groff (warnings are errors) and with `man -l`, those
/// that are installed.
fn render(page: &Path, name: &str) {
    if installed("groff") {
        let (code, out, err) = run(Command::new("groff")
            .args(["-k", "-man", "-Tutf8", "-ww"])
            .arg(page));
        assert_eq!(code, 0, "groff {}: {err}", page.display());
        assert!(
            err.is_empty(),
            "groff warns about {}: {err}",
            page.display()
        );
        assert!(plain(&out).contains("NAME"), "{out}");
    } else {
        eprintln!("groff is not installed; {name} only checked for its .TH line");
    }
    if installed("man") {
        let (code, out, err) = run(Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(page)
            .env("MANWIDTH", "80"));
        assert_eq!(code, 0, "man -l {}: {err}", page.display());
        let out = plain(&out);
        assert!(out.contains("NAME") && out.contains(name), "{out}");
    }
}

/// `text` without the terminal's overstriking (`N\x08N` is a bold N).
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if chars.peek() == Some(&'\x08') {
            chars.next();
        } else {
            out.push(c);
        }
    }
    out
}
