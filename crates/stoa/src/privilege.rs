//! Dropping root (`user = "NAME"`, `--user NAME`): `stoa serve` started as root
//! binds every listener and opens every file it must (certificates, the document
//! root, logs, the mail store) first, then becomes the unprivileged user for good
//! before any worker thread starts.
//!
//! The switch uses glibc's `setgroups`, `setresgid` and `setresuid` (through `nix`),
//! which change every thread of the process (the access-log and web99 threads
//! already run); rustix's raw system calls would change only the calling thread.
//! It is then verified: `setuid(0)` must fail, and every thread's
//! `/proc/self/task/*/status` must show the user for the real, effective, saved and
//! file-system ids, only the chosen group, and no capabilities. Otherwise the
//! server refuses to run. `no_new_privs` is set too, so nothing the server runs
//! (CGI programs) can regain privileges through a set-user-ID program.
//!
//! Files: what Stoa itself creates at this start, before the switch (a new mail
//! directory, web99 state directory or access log), is given to the user. What
//! already existed is left alone, but checked after the switch: a path the user
//! cannot use is an error naming it and the command that fixes it.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use nix::unistd::{Gid, Group, Uid, User};
use rustix::fs::Access;

/// Most files and directories given to the user after a start that created them
/// (a new mail directory holds a handful); more means the path was not new.
const MAX_GIVEN: usize = 10_000;

/// The user and group to become.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The user's name, for messages.
    pub(crate) name: String,
    /// The group's name, for messages.
    pub(crate) group: String,
    uid: Uid,
    gid: Gid,
}

/// The user `user` (and the group `group`, else the user's) the configuration
/// names, looked up; `None` when there is nothing to switch to (none named, or
/// the process already runs as that user). Running as root with no user is
/// allowed, with a warning.
pub(crate) fn resolve(user: Option<&str>, group: Option<&str>) -> anyhow::Result<Option<Target>> {
    let root = Uid::effective().is_root();
    let Some(name) = user else {
        if root {
            tracing::warn!(
                "running as root: set user = \"NAME\" in the configuration (or --user NAME) \
                 to switch to an unprivileged user once the listeners are bound, or run as \
                 that user with `setcap cap_net_bind_service=+ep` on the binary for ports \
                 below 1024"
            );
        }
        return Ok(None);
    };
    let user = User::from_name(name)
        .with_context(|| format!("user {name}: cannot read the user database"))?
        .with_context(|| format!("user {name}: no such user"))?;
    if user.uid.is_root() {
        bail!("user {name}: that is root; name an unprivileged user");
    }
    let (gid, group) = match group {
        Some(g) => {
            let found = Group::from_name(g)
                .with_context(|| format!("group {g}: cannot read the group database"))?
                .with_context(|| format!("group {g}: no such group"))?;
            (found.gid, g.to_owned())
        }
        None => {
            let group = Group::from_gid(user.gid).ok().flatten();
            let group = group.map_or_else(|| user.gid.to_string(), |g| g.name);
            (user.gid, group)
        }
    };
    if !root {
        if Uid::effective() == user.uid && Gid::effective() == gid {
            return Ok(None);
        }
        bail!(
            "user {name}: only root can switch users (this process runs as uid {})",
            Uid::effective()
        );
    }
    Ok(Some(Target {
        name: name.to_owned(),
        group,
        uid: user.uid,
        gid,
    }))
}

/// Of `paths`, the first missing directory on the way to each (the path itself,
/// or the highest of its missing ancestors): what this start creates.
pub(crate) fn missing(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for path in paths {
        let mut top = None;
        let mut p = Some(path.as_path());
        while let Some(here) = p.filter(|p| !p.as_os_str().is_empty()) {
            if fs::symlink_metadata(here).is_ok() {
                break;
            }
            top = Some(here.to_owned());
            p = here.parent();
        }
        if let Some(top) = top.filter(|t| !out.contains(t)) {
            out.push(top);
        }
    }
    out
}

/// Gives `t` what this start created (`created`, from [`missing`] before the
/// servers were bound): each path and everything beneath it, without following
/// symbolic links.
pub(crate) fn give(created: &[PathBuf], t: &Target) -> anyhow::Result<()> {
    let mut budget = MAX_GIVEN;
    for path in created {
        if fs::symlink_metadata(path).is_ok() {
            give_tree(path, t, &mut budget)?;
        }
    }
    Ok(())
}

fn give_tree(path: &Path, t: &Target, budget: &mut usize) -> anyhow::Result<()> {
    *budget = budget.checked_sub(1).with_context(|| {
        format!(
            "{}: more than {MAX_GIVEN} new files to give to {}",
            path.display(),
            t.name
        )
    })?;
    std::os::unix::fs::lchown(path, Some(t.uid.as_raw()), Some(t.gid.as_raw()))
        .with_context(|| format!("cannot give {} to {}", path.display(), t.name))?;
    let meta = fs::symlink_metadata(path).with_context(|| path.display().to_string())?;
    if meta.is_dir() {
        let entries = fs::read_dir(path).with_context(|| path.display().to_string())?;
        for entry in entries {
            let entry = entry.with_context(|| path.display().to_string())?;
            give_tree(&entry.path(), t, budget)?;
        }
    }
    Ok(())
}

/// Becomes `t` for good, then checks that it worked (see the module docs).
pub(crate) fn switch(t: &Target) -> anyhow::Result<()> {
    let what = || format!("cannot switch to user {} and group {}", t.name, t.group);
    nix::unistd::setgroups(&[t.gid]).with_context(what)?;
    nix::unistd::setresgid(t.gid, t.gid, t.gid).with_context(what)?;
    nix::unistd::setresuid(t.uid, t.uid, t.uid).with_context(what)?;
    nix::sys::prctl::set_no_new_privs().with_context(what)?;
    verify(t).with_context(|| {
        format!(
            "the switch to user {} did not take (refusing to run)",
            t.name
        )
    })
}

/// The checks after the switch: root cannot be regained, and every thread runs
/// as `t` with no capabilities.
fn verify(t: &Target) -> anyhow::Result<()> {
    if nix::unistd::setuid(Uid::from_raw(0)).is_ok()
        || nix::unistd::seteuid(Uid::from_raw(0)).is_ok()
    {
        bail!("setuid(0) succeeded after the switch");
    }
    let tasks = fs::read_dir("/proc/self/task").context("/proc/self/task")?;
    let mut seen = 0;
    for task in tasks {
        let path = task.context("/proc/self/task")?.path().join("status");
        let status = match fs::read_to_string(&path) {
            Ok(status) => status,
            // The thread ended meanwhile.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).context(path.display().to_string()),
        };
        check_status(&status, t.uid.as_raw(), t.gid.as_raw())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        seen += 1;
    }
    if seen == 0 {
        bail!("/proc/self/task lists no thread");
    }
    Ok(())
}

/// Whether a `/proc/…/status` text shows `uid` and `gid` for all four ids, only
/// `gid` as supplementary group, and no permitted or effective capability.
fn check_status(status: &str, uid: u32, gid: u32) -> Result<(), String> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::split_whitespace)
            .ok_or_else(|| format!("no {name} line"))
    };
    let ids = |name: &str, want: u32| -> Result<(), String> {
        let got: Vec<&str> = field(name)?.collect();
        if got.len() == 4 && got.iter().all(|id| id.parse() == Ok(want)) {
            Ok(())
        } else {
            Err(format!(
                "{name} is {}, not {want} four times",
                got.join(" ")
            ))
        }
    };
    ids("Uid", uid)?;
    ids("Gid", gid)?;
    let groups: Vec<&str> = field("Groups")?.collect();
    if groups.iter().any(|g| g.parse() != Ok(gid)) {
        return Err(format!("groups are {}, not only {gid}", groups.join(" ")));
    }
    for caps in ["CapPrm", "CapEff"] {
        let value: Vec<&str> = field(caps)?.collect();
        if value
            .first()
            .is_none_or(|v| u64::from_str_radix(v, 16) != Ok(0))
        {
            return Err(format!("{caps} is {}, not 0", value.join(" ")));
        }
    }
    Ok(())
}

/// A path the server uses after the switch, and what it needs there.
#[derive(Debug, Clone)]
pub(crate) struct Need {
    /// What it is, for messages ("the mail queue").
    pub(crate) what: &'static str,
    /// The path.
    pub(crate) path: PathBuf,
    /// Whether the server writes there (else it only reads).
    pub(crate) write: bool,
    /// Whether the server opens it again by name, creating it if it is gone (a
    /// log reopened on SIGHUP after logrotate moved it): the user must be able
    /// to create files in its directory.
    pub(crate) reopened: bool,
}

impl Need {
    /// `what` at `path`, read only.
    pub(crate) fn read(what: &'static str, path: impl Into<PathBuf>) -> Need {
        Need {
            what,
            path: path.into(),
            write: false,
            reopened: false,
        }
    }

    /// `what` at `path`, read and written.
    pub(crate) fn write(what: &'static str, path: impl Into<PathBuf>) -> Need {
        Need {
            write: true,
            ..Need::read(what, path)
        }
    }

    /// `what` at `path`, written, and created again by name after a rotation.
    pub(crate) fn reopened(what: &'static str, path: impl Into<PathBuf>) -> Need {
        Need {
            reopened: true,
            ..Need::write(what, path)
        }
    }
}

/// Checks, as the user now (the real ids are the user's, so `access(2)` answers
/// for them, ACLs included), every path the servers use later: the first one
/// missing its access is the error, with its owner, mode and the fix.
pub(crate) fn check_access(needs: &[Need], t: &Target) -> anyhow::Result<()> {
    for need in needs {
        if need.reopened {
            check_creatable(need, t)?;
        }
        let Ok(meta) = fs::metadata(&need.path) else {
            // Not there (yet): whoever creates it will report a failure with its path.
            continue;
        };
        let mut access = if need.write {
            Access::READ_OK | Access::WRITE_OK
        } else {
            Access::READ_OK
        };
        if meta.is_dir() {
            access |= Access::EXEC_OK;
        }
        if rustix::fs::access(&need.path, access).is_err() {
            let verb = if need.write { "write" } else { "read" };
            bail!(
                "user {} cannot {verb} {} {} (owner {}:{}, mode {:04o}): give it to the user, \
                 e.g. chown -R {}:{} {}",
                t.name,
                need.what,
                need.path.display(),
                meta.uid(),
                meta.gid(),
                meta.mode() & 0o7777,
                t.name,
                t.group,
                need.path.display()
            );
        }
    }
    Ok(())
}

/// A file reopened by name (a log after logrotate moved it) can be created
/// again by the user: its directory lets the user write and search it.
/// Otherwise every reopen after a rotation would fail (the server appending to
/// the rotated file), so the start is refused, naming the directory and the fix.
fn check_creatable(need: &Need, t: &Target) -> anyhow::Result<()> {
    let dir = match need.path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(meta) = fs::metadata(dir) else {
        // Not there: opening the file fails first, naming it.
        return Ok(());
    };
    if rustix::fs::access(dir, Access::WRITE_OK | Access::EXEC_OK).is_ok() {
        return Ok(());
    }
    bail!(
        "user {} cannot create {} {} again in {} (owner {}:{}, mode {:04o}), as it must once \
         log rotation has moved it away: give the directory to the user, e.g. chown {}:{} {}",
        t.name,
        need.what,
        need.path.display(),
        dir.display(),
        meta.uid(),
        meta.gid(),
        meta.mode() & 0o7777,
        t.name,
        t.group,
        dir.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tstoa\nUmask:\t0077\nUid:\t65534\t65534\t65534\t65534\n\
        Gid:\t65534\t65534\t65534\t65534\nGroups:\t65534 \nCapInh:\t0000000000000000\n\
        CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n";

    #[test]
    fn a_complete_switch_passes() {
        assert_eq!(check_status(STATUS, 65534, 65534), Ok(()));
    }

    #[test]
    fn every_leftover_of_root_is_caught() {
        for (from, to, error) in [
            (
                "Uid:\t65534\t65534\t65534\t65534",
                "Uid:\t65534\t65534\t0\t65534",
                "Uid is",
            ),
            (
                "Uid:\t65534\t65534\t65534\t65534",
                "Uid:\t0\t65534\t65534\t65534",
                "Uid is",
            ),
            (
                "Gid:\t65534\t65534\t65534\t65534",
                "Gid:\t0\t0\t0\t0",
                "Gid is",
            ),
            ("Groups:\t65534 ", "Groups:\t0 65534", "groups are"),
            (
                "CapEff:\t0000000000000000",
                "CapEff:\t000001ffffffffff",
                "CapEff is",
            ),
            (
                "CapPrm:\t0000000000000000",
                "CapPrm:\t0000000000000400",
                "CapPrm is",
            ),
            ("Uid:\t65534\t65534\t65534\t65534\n", "", "no Uid line"),
        ] {
            let status = STATUS.replace(from, to);
            assert_ne!(status, STATUS);
            let e = check_status(&status, 65534, 65534).expect_err(to);
            assert!(e.starts_with(error), "{to}: {e}");
        }
        assert!(
            check_status(
                &STATUS.replace("Groups:\t65534 ", "Groups:\t"),
                65534,
                65534
            )
            .is_ok()
        );
    }

    #[test]
    fn missing_finds_the_highest_new_directory() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let a = tmp.path().join("a/b/c");
        let log = tmp.path().join("access.log");
        let found = missing(&[a.clone(), a.join("d"), log.clone(), tmp.path().to_owned()]);
        assert_eq!(found, vec![tmp.path().join("a"), log]);
    }
}
