//! `stoa bench …`: `stoa-bench`'s options (the harnesses' flags, which they
//! derive themselves) handed to the harness, which is wired to the rest of the
//! binary here (the file set comes from `stoa fileset`; the built-in servers are
//! this binary's `stoa serve`). Only `stoa bench ab` has flags of the binary's
//! own to turn into options: each side's target and flags become harness flags.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use stoa_bench::{agent, archive, directory, mail, web};

use crate::cli::{
    BenchAbArgs, BenchCommand, BenchCompareArgs, BenchDirectoryArgs, BenchDiscloseArgs,
    BenchResultsArgs, FilesetArgs,
};

/// Runs one `stoa bench` command.
pub(crate) fn run(command: &BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Web(options) => web::run(options, &fileset_writer()),
        BenchCommand::Agent(options) => agent::serve(options),
        BenchCommand::Mail(options) => mail::run(options),
        BenchCommand::MailUsers(options) => mail::write_users(options),
        BenchCommand::Directory(args) => bench_directory(args),
        BenchCommand::Results(args) => results(args),
        BenchCommand::Compare(args) => compare(args),
        BenchCommand::Ab(args) => stoa_bench::ab::run(&ab_options(args)?),
        BenchCommand::Disclose(args) => disclose(args),
        BenchCommand::Peers(args) => stoa_bench::peers::run(args),
    }
}

#[allow(clippy::print_stdout, reason = "the page is the command's output")]
fn disclose(args: &BenchDiscloseArgs) -> anyhow::Result<()> {
    let dir = archive_dir(args.archive.as_ref());
    let (text, html) = archive::disclose_pages(&dir, &args.run, args.notes.as_deref())?;
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
        for (name, body) in [("disclosure.txt", &text), ("disclosure.html", &html)] {
            let path = out.join(name);
            std::fs::write(&path, body)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    print!("{text}");
    Ok(())
}

/// `stoa bench ab`'s flags: each side's target as the harness's own flags.
fn ab_options(args: &BenchAbArgs) -> anyhow::Result<stoa_bench::ab::Options> {
    use stoa_bench::ab;
    let kind = if args.mail {
        archive::Kind::Mail
    } else {
        archive::Kind::Web
    };
    let target = |t: &Option<String>, flag: &str| -> anyhow::Result<Vec<String>> {
        let Some(t) = t else { return Ok(Vec::new()) };
        if !args.mail {
            return Ok(vec!["--target".into(), t.clone()]);
        }
        match t.split_once(',') {
            Some((smtp, pop3)) if !smtp.is_empty() && !pop3.is_empty() => Ok(vec![
                "--smtp".into(),
                smtp.trim().into(),
                "--pop3".into(),
                pop3.trim().into(),
            ]),
            _ => anyhow::bail!("{flag} {t}: with --mail, the SMTP and POP3 addresses as SMTP,POP3"),
        }
    };
    // A side's harness flags: its target's, then its own (--a-flags).
    let side_args = |t: &Option<String>,
                     t_flag: &str,
                     own: &Option<String>,
                     own_flag: &str|
     -> anyhow::Result<Vec<String>> {
        let mut out = target(t, t_flag)?;
        if let Some(own) = own {
            let words = shlex::split(own).with_context(|| {
                format!("{own_flag} {own:?}: unbalanced quotes or a trailing backslash")
            })?;
            out.extend(words);
        }
        Ok(out)
    };
    Ok(ab::Options {
        kind,
        a: ab::Side {
            label: args.a_label.clone(),
            harness_args: side_args(&args.a_target, "--a-target", &args.a_flags, "--a-flags")?,
            setup: args.a_setup.clone(),
        },
        b: ab::Side {
            label: args.b_label.clone(),
            harness_args: side_args(&args.b_target, "--b-target", &args.b_flags, "--b-flags")?,
            setup: args.b_setup.clone(),
        },
        metric: args.metric,
        precision: args.precision,
        max_rounds: args.max_rounds,
        order: args.order,
        seed: args.seed,
        harness_args: args.harness.clone(),
        archive: archive::Keep {
            dir: args.archive.clone(),
            off: args.no_archive,
            label: None,
            server_config: None,
        },
        exe: None,
    })
}

/// `--archive DIR`, else the default archive.
fn archive_dir(dir: Option<&std::path::PathBuf>) -> std::path::PathBuf {
    dir.cloned().unwrap_or_else(archive::default_dir)
}

#[allow(clippy::print_stdout, reason = "the listing is the command's output")]
fn results(args: &BenchResultsArgs) -> anyhow::Result<()> {
    let dir = archive_dir(args.archive.as_ref());
    print!("{}", archive::results_page(&dir)?);
    Ok(())
}

#[allow(
    clippy::print_stdout,
    reason = "the comparison is the command's output"
)]
fn compare(args: &BenchCompareArgs) -> anyhow::Result<()> {
    let dir = archive_dir(args.archive.as_ref());
    print!("{}", archive::compare_page(&dir, &args.runs)?);
    Ok(())
}

/// The built-in web target's file set: `stoa fileset` with the kit's seed,
/// quietly (the harness prints its own line).
fn fileset_writer() -> web::FilesetWriter {
    Arc::new(|connections: u32, www: &Path, cgi: &Path| {
        let args = FilesetArgs {
            connections,
            dir: www.to_owned(),
            verify: false,
            force: false,
            jobs: None,
            seed: 1999,
            cgi_dir: Some(cgi.to_owned()),
        };
        crate::fileset::write(&args, false)
    })
}

/// `stoa bench directory`: the `[directory]` of the file, opened fresh for
/// each cache mode.
fn bench_directory(args: &BenchDirectoryArgs) -> anyhow::Result<()> {
    let ldap = ldap_options(&args.config)?;
    let options = &args.options;
    let capacity = if ldap.cache_capacity == 0 {
        stoa_directory::ldap::DEFAULT_CACHE_CAPACITY
    } else {
        ldap.cache_capacity
    };
    if options.cache.contains(&directory::Cache::On) && options.hot_set > capacity as u64 {
        anyhow::bail!(
            "--hot-set {} is larger than the cache ({capacity})",
            options.hot_set
        );
    }
    let open = |cache: directory::Cache| -> anyhow::Result<Arc<dyn stoa_directory::Directory>> {
        let mut o = ldap.clone();
        o.cache_capacity = match cache {
            directory::Cache::Off => 0,
            directory::Cache::On => capacity,
        };
        Ok(Arc::new(stoa_directory::LdapDirectory::new(o)?))
    };
    directory::run(options, &open).map(|_| ())
}

/// The LDAP settings of the file's `[directory]`, read as `stoa serve` reads them.
fn ldap_options(config: &Path) -> anyhow::Result<stoa_directory::LdapOptions> {
    // `load` wants a server to configure; a placeholder SMTP listener on the
    // command line lets a file with nothing but `[directory]` through.
    let args = crate::cli::ServeArgs {
        config: Some(config.to_owned()),
        mail_dir: Some(std::env::temp_dir()),
        smtp_listen: vec!["127.0.0.1:0".into()],
        ..crate::cli::ServeArgs::default()
    };
    let loaded = crate::config::load(&args, |p| std::fs::read_to_string(p), &std::env::temp_dir())
        .map_err(|errors| anyhow::anyhow!("{}: {}", config.display(), errors.join("; ")))?;
    match loaded.directory {
        crate::config::Directory::Ldap(o) => Ok(*o),
        crate::config::Directory::Embedded(_) => anyhow::bail!(
            "{}: bench directory measures the LDAP backend; set [directory] backend = \"ldap\"",
            config.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser as _;

    use super::*;

    fn bench(argv: &[&str]) -> Result<BenchCommand, clap::Error> {
        let argv = ["stoa", "bench"].iter().chain(argv);
        crate::cli::Cli::try_parse_from(argv).map(|cli| match cli.command {
            crate::cli::Command::Bench(command) => command,
            _ => unreachable!("stoa bench"),
        })
    }

    fn directory_options(extra: &[&str]) -> Result<directory::Options, clap::Error> {
        let mut argv = vec!["directory", "--config", "d.toml"];
        argv.extend_from_slice(extra);
        bench(&argv).map(|command| match command {
            BenchCommand::Directory(a) => a.options,
            _ => unreachable!("bench directory"),
        })
    }

    fn mail_options(extra: &[&str]) -> Result<mail::Options, clap::Error> {
        let mut argv = vec!["mail"];
        argv.extend_from_slice(extra);
        bench(&argv).map(|command| match command {
            BenchCommand::Mail(o) => o,
            _ => unreachable!("bench mail"),
        })
    }

    #[test]
    fn directory_flags() {
        let o = directory_options(&["--users", "1500000"]).expect("defaults");
        assert_eq!(
            (o.users, o.concurrency.as_slice()),
            (1_500_000, &[1, 64][..])
        );
        assert_eq!(o.duration, Duration::from_secs(20));
        assert_eq!(o.cache, [directory::Cache::Off, directory::Cache::On]);
        let o = directory_options(&[
            "--users",
            "5",
            "--concurrency",
            "2",
            "--duration",
            "1s",
            "--cache",
            "on",
            "--verify",
            "ssha=user1@stoa.test,user2@stoa.test",
        ])
        .expect("custom");
        assert_eq!(
            (o.concurrency.as_slice(), o.duration),
            (&[2][..], Duration::from_secs(1))
        );
        assert_eq!(
            (o.cache.as_slice(), o.verify.len()),
            (&[directory::Cache::On][..], 1)
        );
        assert!(directory_options(&["--users", "1", "--cache", "lukewarm"]).is_err());
        let e = directory_options(&["--users", "1", "--duration", "x"]).expect_err("x");
        assert!(
            e.to_string().contains("'x' for '--duration <DURATION>'"),
            "{e}"
        );
    }

    #[test]
    fn mail_durations_are_parsed_with_the_flags() {
        let o = mail_options(&[]).expect("defaults");
        assert_eq!(o.reply_timeout, Duration::from_secs(60));
        assert_eq!((o.run_time, o.profile), (None, mail::ProfileName::Quick));
        let o = mail_options(&["--profile", "standard", "--run-time", "90s"]).expect("custom");
        assert_eq!(
            (o.run_time, o.profile),
            (Some(Duration::from_secs(90)), mail::ProfileName::Standard)
        );
        let e = mail_options(&["--reply-timeout", "soon"]).expect_err("soon");
        assert!(
            e.to_string()
                .contains("'soon' for '--reply-timeout <DURATION>'"),
            "{e}"
        );
    }

    /// Issue 51: the choices are enums, spelled on the command line as before.
    #[test]
    fn choices_keep_their_spellings() {
        let web = |argv: &[&str]| match bench(&[&["web"], argv].concat()) {
            Ok(BenchCommand::Web(o)) => Ok(o),
            Ok(_) => unreachable!("bench web"),
            Err(e) => Err(e),
        };
        let o = web(&["--http", "2", "--profile", "standard"]).expect("valid");
        assert!(o.http.is_http2() && o.profile == web::ProfileName::Standard);
        let o = web(&["--http", "1.0"]).expect("valid");
        assert_eq!(o.http.version(), stoa_web99::workload::HttpVersion::Http10);
        assert!(web(&["--http", "3"]).is_err());
        let users = [
            "mail-users",
            "--users",
            "2",
            "--out",
            "u",
            "--format",
            "plain",
        ];
        match bench(&users).expect("valid") {
            BenchCommand::MailUsers(o) => assert_eq!(o.format, mail::UsersFormat::Plain),
            _ => unreachable!("bench mail-users"),
        }
        match bench(&["ab", "--metric", "throughput", "--order", "random"]).expect("valid") {
            BenchCommand::Ab(a) => {
                let o = ab_options(&a).expect("options");
                assert_eq!(o.metric, stoa_bench::ab::Metric::Throughput);
                assert_eq!(o.order, stoa_bench::ab::Order::Random);
            }
            _ => unreachable!("bench ab"),
        }
        let serve = crate::cli::Cli::try_parse_from([
            "stoa",
            "serve",
            "--runtime",
            "multi-thread",
            "--log-format",
            "combined",
        ])
        .expect("valid");
        match serve.command {
            crate::cli::Command::Serve(a) => {
                assert_eq!(a.runtime, Some(crate::cli::Runtime::MultiThread));
                assert_eq!(a.log_format, Some(crate::cli::LogFormat::Combined));
            }
            _ => unreachable!("serve"),
        }
        assert!(crate::cli::Cli::try_parse_from(["stoa", "serve", "--runtime", "x"]).is_err());
    }
}
