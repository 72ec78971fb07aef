//! `[[mail_host]]`: the store hosts that users' `mailHost` values name, and where
//! their servers listen. The MTA delivers to a listed host's `lmtp` address (any
//! other host by its name on port 24); `pop3` and `imap` are read and kept for the
//! POP3 and IMAP proxies.

use stoa_smtp::config::MailHost;
use toml::{Table, Value};

use super::Report;

/// The keys of one `[[mail_host]]` entry.
const KEYS: &[&str] = &["name", "lmtp", "pop3", "imap"];

/// Reads every `[[mail_host]]` entry of the file and checks them together.
pub(super) fn read(file: &Table, r: &mut Report) -> Vec<MailHost> {
    let entries = match file.get("mail_host") {
        None => return Vec::new(),
        Some(Value::Array(entries)) => entries,
        Some(other) => {
            r.errors.push(format!(
                "mail_host: expected [[mail_host]] tables, found {}",
                other.type_str()
            ));
            return Vec::new();
        }
    };
    let mut hosts: Vec<MailHost> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let path = format!("mail_host[{i}].");
        let Value::Table(t) = entry else {
            r.errors.push(format!(
                "mail_host[{i}]: expected a table, found {}",
                entry.type_str()
            ));
            continue;
        };
        if let Some(host) = read_entry(t, &path, r) {
            let key = host.name.trim_end_matches('.').to_ascii_lowercase();
            let seen = hosts
                .iter()
                .any(|h| h.name.trim_end_matches('.').eq_ignore_ascii_case(&key));
            r.check(!seen, &format!("{path}name {:?}: listed twice", host.name));
            hosts.push(host);
        }
    }
    hosts
}

/// One entry; `None` when it has no usable name.
fn read_entry(t: &Table, path: &str, r: &mut Report) -> Option<MailHost> {
    r.known_keys(t, path, KEYS);
    let name = r.string(t, path, "name");
    let [lmtp, pop3, imap] = ["lmtp", "pop3", "imap"].map(|key| {
        let value = r.string(t, path, key)?;
        let ok = value
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
        r.check(ok, &format!("{path}{key} {value:?}: expected HOST:PORT"));
        ok.then_some(value)
    });
    let Some(name) = name.filter(|n| is_host_name(n)) else {
        r.errors.push(format!(
            "{path}name: a host name is required (the users' mailHost)"
        ));
        return None;
    };
    Some(MailHost {
        name,
        lmtp,
        pop3,
        imap,
    })
}

fn is_host_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::cli::ServeArgs;

    fn read_text(text: &str) -> (Vec<MailHost>, Report) {
        let mut r = Report::default();
        let hosts = read(&text.parse::<Table>().expect("toml"), &mut r);
        (hosts, r)
    }

    #[test]
    fn entries_are_read() {
        let (hosts, r) = read_text(
            "[[mail_host]]\nname = \"store-b.stoa.test\"\nlmtp = \"127.0.0.1:2401\"\n\
             pop3 = \"127.0.0.1:1101\"\nimap = \"127.0.0.1:1431\"\n[[mail_host]]\nname = \"store-c.stoa.test\"\n",
        );
        assert!(r.errors.is_empty() && r.warnings.is_empty(), "{r:?}");
        assert_eq!(
            hosts,
            [
                MailHost {
                    name: "store-b.stoa.test".into(),
                    lmtp: Some("127.0.0.1:2401".into()),
                    pop3: Some("127.0.0.1:1101".into()),
                    imap: Some("127.0.0.1:1431".into()),
                },
                MailHost {
                    name: "store-c.stoa.test".into(),
                    lmtp: None,
                    pop3: None,
                    imap: None,
                }
            ]
        );
    }

    #[test]
    fn every_mistake_is_reported() {
        let (_, r) = read_text(
            "[[mail_host]]\nname = \"a.test\"\nlmtp = \"nowhere\"\nport = 1\nimap = \"x\"\n\
             [[mail_host]]\nname = \"A.test.\"\n[[mail_host]]\nlmtp = \"h:24\"\n",
        );
        for expected in [
            "mail_host[0].lmtp \"nowhere\": expected HOST:PORT",
            "mail_host[1].name \"A.test.\": listed twice",
            "mail_host[2].name: a host name is required",
            "mail_host[0].port: unknown key",
            "mail_host[0].imap \"x\": expected HOST:PORT",
        ] {
            assert!(
                r.errors.iter().any(|e| e.contains(expected)),
                "{expected}: {r:?}"
            );
        }
    }

    #[test]
    fn the_smtp_server_gets_the_entries() {
        let file = "[smtp]\nmail_dir = \"/m\"\nlisten = [\"127.0.0.1:25\"]\n\
                    [[mail_host]]\nname = \"store-b.stoa.test\"\nlmtp = \"10.0.0.3:24\"\n";
        let args = ServeArgs {
            config: Some(PathBuf::from("/etc/stoa/stoa.toml")),
            ..ServeArgs::default()
        };
        let loaded =
            super::super::load(&args, |_| Ok(file.to_owned()), Path::new("/w")).expect("valid");
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let hosts = loaded.mail_hosts;
        assert_eq!(hosts.len(), 1);
        assert_eq!(hosts[0].lmtp.as_deref(), Some("10.0.0.3:24"));
    }
}
