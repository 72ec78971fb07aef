//! The embedded directory written as LDIF (RFC 2849) for `slapadd` or `ldapadd`,
//! so that a one-host install moves to LDAP without resetting passwords or
//! losing mail.
//!
//! Each user becomes one `inetOrgPerson` + `inetLocalMailRecipient` entry,
//! `uid=ADDRESS,BASE`, with the attributes [`LdapDirectory`](crate::LdapDirectory)
//! reads: `mail`, `employeeNumber` (the mailbox number, so the store's mailboxes
//! stay theirs), `mailHost` (the user's own, else the one given for users on this
//! host), `userPassword` in the RFC 3112 spelling of the stored scheme
//! ([`scheme::ldap_value`](crate::scheme::ldap_value)): `{ARGON2}` + the PHC string
//! (OpenLDAP's argon2 module uses the same scheme name, so a bind can check it too
//! when that module is loaded), `{CRYPT}$6$…` for sha512-crypt and `{CRYPT}$2y$…`
//! for bcrypt (slapd's `{CRYPT}` calls the system's `crypt(3)`, which knows both
//! on glibc/libxcrypt systems), `{SSHA}` as it is. A plain-text password has no
//! LDAP form (slapd would take a value without a scheme as clear text; this
//! crate's LDAP backend refuses one): the export fails before writing anything,
//! naming the first such user ([`Error::NoLdapForm`]). An alias whose only target is a local user becomes a `mailLocalAddress`
//! of that user; other aliases (several targets, remote targets, aliases of
//! aliases) have no place in this schema and are listed in [`LdifSummary`]
//! instead. Local domains are written as a comment: the LDAP directory finds
//! them from the users' addresses, or from its `domains` setting.

use std::collections::HashMap;
use std::io::Write;

use super::EmbeddedDirectory;
use super::store::{Snapshot, UserRecord};
use crate::error::{Error, Result};
use crate::scheme;

/// What [`EmbeddedDirectory::write_ldif`] wrote and what it could not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LdifSummary {
    /// Entries written.
    pub users: usize,
    /// Aliases written as `mailLocalAddress`.
    pub aliases: usize,
    /// Aliases left out (not a single local user's), by address.
    pub skipped_aliases: Vec<String>,
}

impl EmbeddedDirectory {
    /// Writes every user as an LDIF entry under `base` (see the module docs);
    /// `mail_host` is the `mailHost` of users stored on this host. Nothing is
    /// written when a user's password has no LDAP form.
    pub fn write_ldif(
        &self,
        base: &str,
        mail_host: Option<&str>,
        out: &mut dyn Write,
    ) -> Result<LdifSummary> {
        let s = self.snapshot();
        let mut users: Vec<(&str, &UserRecord)> = s.users.iter().map(|(a, r)| (&**a, r)).collect();
        users.sort_by(|a, b| a.0.cmp(b.0));
        let mut passwords = Vec::with_capacity(users.len());
        for (address, record) in &users {
            let value = match record.password.as_deref() {
                None => None,
                Some(stored) => Some(
                    scheme::ldap_value(stored)
                        .ok_or_else(|| Error::NoLdapForm(address.to_string()))?,
                ),
            };
            passwords.push(value);
        }
        write_entries(&s, base, mail_host, &users, &passwords, out).map_err(Error::Output)
    }
}

/// The entries of `users` (sorted, with their LDAP password values), then the
/// summary.
fn write_entries(
    s: &Snapshot,
    base: &str,
    mail_host: Option<&str>,
    users: &[(&str, &UserRecord)],
    passwords: &[Option<String>],
    out: &mut dyn Write,
) -> std::io::Result<LdifSummary> {
    let mut summary = LdifSummary::default();
    let mut extra: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut aliases: Vec<_> = s.aliases.iter().collect();
    aliases.sort();
    for (alias, targets) in aliases {
        match targets.as_slice() {
            [only] if s.users.contains_key(only) => {
                extra.entry(&**only).or_default().push(&**alias);
                summary.aliases += 1;
            }
            _ => summary.skipped_aliases.push(alias.to_string()),
        }
    }
    let domains: Vec<&str> = s.domains.iter().map(String::as_str).collect();
    writeln!(out, "# Stoa users; local domains: {}\n", domains.join(" "))?;
    for (&(address, record), password) in users.iter().zip(passwords) {
        let dn = format!("uid={},{base}", ldap3::dn_escape(address));
        let local = address.split_once('@').map_or(address, |(l, _)| l);
        write!(
            out,
            "dn: {dn}\nobjectClass: inetOrgPerson\nobjectClass: inetLocalMailRecipient\n\
                 uid: {address}\ncn: {address}\nsn: {local}\nmail: {address}\n\
                 employeeNumber: {}\n",
            record.mailbox
        )?;
        for alias in extra.get(address).into_iter().flatten() {
            writeln!(out, "mailLocalAddress: {alias}")?;
        }
        if let Some(host) = record.mail_host.as_deref().or(mail_host) {
            writeln!(out, "mailHost: {host}")?;
        }
        if let Some(value) = password {
            writeln!(out, "userPassword: {value}")?;
        }
        writeln!(out)?;
        summary.users += 1;
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use crate::password::PasswordCost;
    use crate::{EmbeddedDirectory, Options};

    #[test]
    fn users_aliases_and_hashes() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let options = Options {
            cost: PasswordCost::MINIMUM,
            ..Options::default()
        };
        let dir = EmbeddedDirectory::open(tmp.path(), options).expect("open");
        dir.add_domain("stoa.test").expect("domain");
        dir.add_user("joe@stoa.test", Some("pw")).expect("joe");
        dir.add_user("ann@stoa.test", None).expect("ann");
        dir.set_mail_host("ann@stoa.test", Some("store-b.stoa.test"))
            .expect("host");
        dir.add_alias("joseph@stoa.test", &["joe@stoa.test"])
            .expect("alias");
        dir.add_alias("all@stoa.test", &["joe@stoa.test", "ann@stoa.test"])
            .expect("list");
        let mut out = Vec::new();
        let summary = dir
            .write_ldif(
                "ou=people,dc=stoa,dc=test",
                Some("store-a.stoa.test"),
                &mut out,
            )
            .expect("write");
        assert_eq!((summary.users, summary.aliases), (2, 1));
        assert_eq!(summary.skipped_aliases, ["all@stoa.test"]);
        let text = String::from_utf8(out).expect("UTF-8");
        let joe = text
            .split("\n\n")
            .find(|e| e.starts_with("dn: uid=joe@stoa.test,ou=people,dc=stoa,dc=test\n"))
            .expect("joe's entry");
        for line in [
            "mail: joe@stoa.test",
            "employeeNumber: 1",
            "mailLocalAddress: joseph@stoa.test",
            "mailHost: store-a.stoa.test",
            "userPassword: {ARGON2}$argon2id$v=19$m=8,t=1,p=1$",
        ] {
            assert!(joe.contains(line), "{line} in {joe}");
        }
        let ann = text
            .split("\n\n")
            .find(|e| e.contains("uid: ann@"))
            .expect("ann");
        assert!(ann.contains("mailHost: store-b.stoa.test"), "{ann}");
        assert!(!ann.contains("userPassword"), "{ann}");
        assert!(text.starts_with("# Stoa users; local domains: stoa.test\n"));
    }
}

#[cfg(test)]
mod scheme_tests {
    use crate::scheme::{self, Scheme};
    use crate::{EmbeddedDirectory, Error, Options};

    #[test]
    fn each_scheme_in_its_ldap_spelling_and_plain_text_refused() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let options = Options {
            cost: crate::PasswordCost::MINIMUM,
            bcrypt_cost: scheme::MIN_BCRYPT_COST,
            allow_plain: true,
            ..Options::default()
        };
        let dir = EmbeddedDirectory::open(tmp.path(), options).expect("open");
        dir.add_domain("stoa.test").expect("domain");
        let mut users = Vec::new();
        for s in [
            Scheme::Argon2id,
            Scheme::Sha512Crypt,
            Scheme::BlfCrypt,
            Scheme::Ssha,
        ] {
            let value = scheme::hash("pw", s, &scheme::Cost::MINIMUM).expect("hash");
            users.push(crate::embedded::NewUser {
                address: format!("{}@stoa.test", s.name()),
                password_hash: Some(value),
            });
        }
        dir.add_users(&users).expect("users");
        let mut out = Vec::new();
        dir.write_ldif("ou=people,dc=stoa,dc=test", None, &mut out)
            .expect("write");
        let text = String::from_utf8(out).expect("UTF-8");
        let values: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("userPassword: "))
            .collect();
        assert_eq!(values.len(), 4, "{text}");
        for prefix in [
            "{ARGON2}$argon2id$",
            "{CRYPT}$6$",
            "{CRYPT}$2y$04$",
            "{SSHA}",
        ] {
            let value = values.iter().find(|v| v.starts_with(prefix));
            let value = value.unwrap_or_else(|| panic!("{prefix} in {text}"));
            assert!(scheme::verify("pw", value, false), "{value}");
        }
        dir.add_user("plain@stoa.test", Some("pw"))
            .expect("argon2 first");
        dir.add_users(&[crate::embedded::NewUser {
            address: "zed@stoa.test".into(),
            password_hash: Some("{PLAIN.BASE64}cHc=".into()),
        }])
        .expect("plain user");
        let mut out = Vec::new();
        let err = dir
            .write_ldif("ou=people,dc=stoa,dc=test", None, &mut out)
            .expect_err("plain text has no LDAP form");
        assert!(
            matches!(&err, Error::NoLdapForm(a) if a == "zed@stoa.test"),
            "{err}"
        );
        assert!(out.is_empty(), "nothing written");
    }
}
