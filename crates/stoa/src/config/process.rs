//! The process's own settings, top-level keys of the file: `user` (and `--user`),
//! the unprivileged user `stoa serve` becomes once everything is bound; `group`,
//! the group it runs as instead of that user's own; `umask`, the permission bits
//! taken away from everything the server creates.
//!
//! Only the names are checked here; looking them up in the system's user database
//! is the server's, at start (`crate::privilege`).

use toml::{Table, Value};

use super::Report;
use crate::cli::ServeArgs;

/// The umask unless the file sets one: nothing Stoa creates is readable by
/// anyone but its owner (access logs, the web99 state, the mail directory).
pub(crate) const DEFAULT_UMASK: u32 = 0o077;

/// Longest user or group name accepted (Linux's `useradd` allows 32).
const MAX_NAME: usize = 32;

/// How the process runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Process {
    /// The user to switch to after binding (`user`, `--user`).
    pub(crate) user: Option<String>,
    /// The group to switch to instead of the user's primary group (`group`).
    pub(crate) group: Option<String>,
    /// The process umask (`umask`), set before anything is created.
    pub(crate) umask: u32,
}

impl Default for Process {
    fn default() -> Self {
        Process {
            user: None,
            group: None,
            umask: DEFAULT_UMASK,
        }
    }
}

impl Process {
    /// The permission bits the mail store gives message files: `0660` less the
    /// umask, never any bit for others (mail stays private even under `umask =
    /// 0o022`).
    pub(crate) fn mail_file_mode(&self) -> u32 {
        0o660 & !self.umask
    }

    /// The permission bits of the mail store's directories: `0770` less the umask.
    pub(crate) fn mail_dir_mode(&self) -> u32 {
        0o770 & !self.umask
    }
}

/// Reads `user`, `group` and `umask` from the top of the file `t`.
pub(super) fn read_table(t: &Table, r: &mut Report) -> Process {
    let mut process = Process {
        user: r.string(t, "", "user").and_then(|n| name("user", n, r)),
        group: r.string(t, "", "group").and_then(|n| name("group", n, r)),
        ..Process::default()
    };
    if let Some(v) = t.get("umask") {
        match parse_umask(v) {
            Ok(mask) => process.umask = mask,
            Err(e) => r.errors.push(format!("umask: {e}")),
        }
    }
    process
}

/// The file's settings (or the defaults), `--user` over `user`, checked.
pub(super) fn finish(file: Option<Process>, args: &ServeArgs, r: &mut Report) -> Process {
    let mut process = file.unwrap_or_default();
    if let Some(user) = &args.user {
        process.user = name("--user", user.clone(), r);
    }
    if process.group.is_some() && process.user.is_none() {
        r.errors.push(
            "group: needs user = \"NAME\" (or --user NAME): the group is switched to with it"
                .into(),
        );
    }
    process
}

/// `text` when it is a plausible user or group name (what `useradd` accepts:
/// letters, digits, `_`, `-`, `.`, not starting with `-`, at most 32 bytes).
fn name(what: &str, text: String, r: &mut Report) -> Option<String> {
    let ok = !text.is_empty()
        && text.len() <= MAX_NAME
        && !text.starts_with('-')
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Some(text)
    } else {
        r.errors.push(format!(
            "{what}: {text:?} is not a user or group name (letters, digits, _ - ., at most \
             {MAX_NAME})"
        ));
        None
    }
}

/// A umask: an octal TOML integer (`0o027`) or a string of octal digits
/// (`"027"`, `"0027"`, as `umask(1)` prints them), at most `0o777`.
fn parse_umask(v: &Value) -> Result<u32, String> {
    let mask = match v {
        Value::Integer(n) => u32::try_from(*n).map_err(|_| format!("{n} is out of range"))?,
        Value::String(s) => {
            let digits = s.strip_prefix("0o").unwrap_or(s);
            if digits.is_empty() || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
                return Err(format!("{s:?} is not an octal umask like \"027\""));
            }
            u32::from_str_radix(digits, 8).map_err(|_| format!("{s:?} is out of range"))?
        }
        other => {
            return Err(format!(
                "expected an octal integer like 0o027 or a string like \"027\", found {other}"
            ));
        }
    };
    if mask > 0o777 {
        return Err(format!("{mask:#o} is more than 0o777"));
    }
    Ok(mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str, args: &ServeArgs) -> (Process, Report) {
        let table: Table = text.parse().expect("toml");
        let mut r = Report::default();
        let p = read_table(&table, &mut r);
        let p = finish(Some(p), args, &mut r);
        (p, r)
    }

    #[test]
    fn defaults_keys_and_flag() {
        let (p, r) = read_text("", &ServeArgs::default());
        assert_eq!(p, Process::default());
        assert_eq!(p.umask, 0o077);
        assert!(r.errors.is_empty());
        let (p, r) = read_text(
            "user = \"stoa\"\ngroup = \"mail\"\numask = 0o027",
            &ServeArgs::default(),
        );
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(p.user.as_deref(), Some("stoa"));
        assert_eq!(p.group.as_deref(), Some("mail"));
        assert_eq!(
            (p.umask, p.mail_file_mode(), p.mail_dir_mode()),
            (0o027, 0o640, 0o750)
        );
        let args = ServeArgs {
            user: Some("nobody".into()),
            ..ServeArgs::default()
        };
        let (p, _) = read_text("user = \"stoa\"\numask = \"0022\"", &args);
        assert_eq!(p.user.as_deref(), Some("nobody"), "the flag wins");
        assert_eq!(p.umask, 0o022);
        assert_eq!(p.mail_file_mode(), 0o640, "mail is never world-readable");
    }

    #[test]
    fn bad_values_are_named() {
        for (text, error) in [
            ("umask = 0o1777", "umask: 0o1777 is more than 0o777"),
            ("umask = \"089\"", "umask: \"089\" is not an octal umask"),
            ("umask = true", "umask: expected an octal integer"),
            ("user = \"-x\"", "user: \"-x\" is not a user or group name"),
            (
                "user = \"a b\"",
                "user: \"a b\" is not a user or group name",
            ),
            ("user = 3", "user: expected a string"),
            ("group = \"mail\"", "group: needs user"),
        ] {
            let (_, r) = read_text(text, &ServeArgs::default());
            assert!(
                r.errors.iter().any(|e| e.starts_with(error)),
                "{text}: {:?}",
                r.errors
            );
        }
    }
}
