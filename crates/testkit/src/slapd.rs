//! A real OpenLDAP `slapd` (Debian's `slapd` package) for directory tests: its own
//! temporary directory, a generated `slapd.conf` (back-mdb, the `core`, `cosine`,
//! `inetorgperson` and `misc` schemas), users loaded with `slapadd` before it
//! starts, a free loopback port, stopped and restarted on that same port, and
//! killed when the guard drops. Never the system's slapd.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rustix::process::Signal;

use crate::process::{Process, run};
use crate::wait::wait_until;

/// Where Debian installs the server.
pub const SLAPD: &str = "/usr/sbin/slapd";
/// The suffix of the test directory.
pub const BASE: &str = "dc=stoa,dc=test";
/// The directory's manager (slapd's `rootdn`), which may read `userPassword`.
pub const ADMIN_DN: &str = "cn=admin,dc=stoa,dc=test";
/// The manager's password.
pub const ADMIN_PASSWORD: &str = "admin-secret";
/// How long slapd may take to load, start or stop: it takes well under a second,
/// but a loaded two-core machine stretches that.
pub const SLAPD_TIMEOUT: Duration = Duration::from_secs(30);

/// One user entry under `ou=people` for [`Slapd::start`]'s LDIF:
/// `uid@stoa.test` (`inetOrgPerson` + `inetLocalMailRecipient`), its mailbox
/// number as `employeeNumber`, `mailHost: host`, `userPassword: password` as
/// stored (`{SSHA}…`, `{ARGON2}…`), then `extra` attribute lines (each ending in a
/// newline).
pub fn user_entry(uid: &str, mailbox: u64, host: &str, password: &str, extra: &str) -> String {
    format!(
        "dn: uid={uid},ou=people,{BASE}\nobjectClass: inetOrgPerson\n\
         objectClass: inetLocalMailRecipient\nuid: {uid}\ncn: {uid}\nsn: {uid}\n\
         mail: {uid}@stoa.test\n{extra}mailHost: {host}\nemployeeNumber: {mailbox}\n\
         userPassword: {password}\n\n"
    )
}

/// A running (or stopped) test slapd.
pub struct Slapd {
    dir: tempfile::TempDir,
    port: u16,
    process: Option<Process>,
}

impl Slapd {
    /// Whether slapd is installed (tests skip, loudly, when it is not).
    pub fn available() -> bool {
        Path::new(SLAPD).exists()
    }

    /// A slapd holding the base entry and `ldif` (entries under [`BASE`]), started.
    pub fn start(ldif: &str) -> Slapd {
        let dir = crate::fs::temp_dir();
        std::fs::create_dir_all(dir.path().join("db")).expect("create the database directory");
        std::fs::write(dir.path().join("slapd.conf"), config(dir.path())).expect("slapd.conf");
        let data = format!("{}\n{ldif}", base_entries());
        let input = dir.path().join("data.ldif");
        std::fs::write(&input, data).expect("write the LDIF");
        let loaded = run(
            Command::new("/usr/sbin/slapadd")
                .arg("-f")
                .arg(dir.path().join("slapd.conf"))
                .arg("-l")
                .arg(&input),
            b"",
            SLAPD_TIMEOUT,
        );
        assert!(
            loaded.status.success(),
            "slapadd failed:\n{}",
            loaded.stderr
        );
        let port = free_port();
        let mut slapd = Slapd {
            dir,
            port,
            process: None,
        };
        slapd.restart();
        slapd
    }

    /// `ldap://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("ldap://127.0.0.1:{}", self.port)
    }

    /// The port it listens on (kept across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The temporary directory (configuration, database, pid file).
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    /// Stops it (SIGTERM, then waits for the exit); the port is closed after.
    pub fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.signal(Signal::TERM);
            if process.wait_exit(SLAPD_TIMEOUT).is_none() {
                process.kill();
            }
        }
    }

    /// Starts it again (or for the first time) on the same port, and waits until
    /// it accepts connections.
    pub fn restart(&mut self) {
        self.stop();
        let listen = format!("ldap://127.0.0.1:{}/", self.port);
        // `-d 0`: stay in the foreground (so the guard owns the process), log nothing.
        let process = Process::spawn(
            Command::new(SLAPD)
                .arg("-f")
                .arg(self.dir.path().join("slapd.conf"))
                .arg("-h")
                .arg(&listen)
                .arg("-d")
                .arg("0"),
        );
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let up = wait_until(SLAPD_TIMEOUT, || {
            TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
        });
        assert!(
            up,
            "slapd did not listen on {addr}:\n{}",
            process.stderr_text()
        );
        self.process = Some(process);
    }
}

impl Drop for Slapd {
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }
}

/// A port nobody listens on now (the kernel's choice for port 0).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    listener.local_addr().expect("local address").port()
}

/// The base entry and the `ou=people` container.
fn base_entries() -> String {
    format!(
        "dn: {BASE}\nobjectClass: top\nobjectClass: dcObject\nobjectClass: organization\n\
         o: Stoa test\ndc: stoa\n\n\
         dn: ou=people,{BASE}\nobjectClass: organizationalUnit\nou: people\n"
    )
}

/// `slapd.conf` for a directory in `dir`: the manager reads everything, anonymous
/// clients may bind (auth) but never read `userPassword`.
fn config(dir: &Path) -> String {
    let dir = dir.display();
    format!(
        "include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/misc.schema
pidfile {dir}/slapd.pid
argsfile {dir}/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
suffix \"{BASE}\"
rootdn \"{ADMIN_DN}\"
rootpw {ADMIN_PASSWORD}
directory {dir}/db
index objectClass eq
index mail eq,sub
index mailLocalAddress eq
access to attrs=userPassword
  by anonymous auth
  by * none
access to * by * read
"
    )
}
