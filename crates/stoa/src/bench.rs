//! `stoa bench …`: the parsed flags turned into `stoa-bench`'s options, and the
//! harness wired to the rest of the binary (the file set comes from
//! `stoa fileset`; the built-in servers are this binary's `stoa serve`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use stoa_bench::{agent, archive, directory, mail, web};
use stoa_web99::workload::HttpVersion;

use crate::cli::{
    ArchiveArgs, BenchAbArgs, BenchAgentArgs, BenchCommand, BenchCompareArgs, BenchDirectoryArgs,
    BenchDiscloseArgs, BenchMailArgs, BenchMailUsersArgs, BenchResultsArgs, BenchWebArgs,
    FilesetArgs,
};

/// Runs one `stoa bench` command.
pub(crate) fn run(command: &BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Web(args) => web::run(&web_options(args)?, &fileset_writer()),
        BenchCommand::Agent(args) => agent::serve(&agent_options(args)),
        BenchCommand::Mail(args) => mail::run(&mail_options(args)?),
        BenchCommand::MailUsers(args) => mail::write_users(&users_options(args)),
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
        metric: match args.metric.as_str() {
            "score" => ab::Metric::Score,
            "throughput" => ab::Metric::Throughput,
            _ => ab::Metric::CpuPerOp,
        },
        precision: args.precision,
        max_rounds: args.max_rounds,
        order: if args.order == "random" {
            ab::Order::Random
        } else {
            ab::Order::Alternate
        },
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

/// The archive flags as the harness takes them.
fn keep(args: &ArchiveArgs) -> archive::Keep {
    archive::Keep {
        dir: args.archive.clone(),
        off: args.no_archive,
        label: args.label.clone(),
        server_config: args.server_config.clone(),
    }
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

/// A duration flag's value; the error names the flag.
fn duration(text: Option<&String>, flag: &str) -> anyhow::Result<Option<Duration>> {
    text.map(|t| crate::config::parse_duration(t).map_err(|e| anyhow::anyhow!("{flag} {t}: {e}")))
        .transpose()
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

fn web_options(args: &BenchWebArgs) -> anyhow::Result<web::Options> {
    Ok(web::Options {
        target: args.target.clone(),
        tls: args.tls,
        tls_resume: args.tls_resume,
        tls_ca: args.tls_ca.clone(),
        tls_insecure: args.tls_insecure,
        http2: args.http == "2",
        connections: args.connections,
        profile: if args.profile == "standard" {
            web::ProfileName::Standard
        } else {
            web::ProfileName::Quick
        },
        run_time: duration(args.run_time.as_ref(), "--run-time")?,
        iterations: args.iterations,
        http: if args.http == "1.0" {
            HttpVersion::Http10
        } else {
            HttpVersion::Http11
        },
        static_only: args.static_only,
        closed_loop: args.closed_loop,
        print_urls: args.print_urls,
        find_max: args.find_max,
        find_max_limit: args.find_max_limit,
        threads: args.threads,
        agents: args.agents.clone(),
        server_pid: args.server_pid.clone(),
        harness_cpus: args.harness_cpus.clone(),
        server_cpus: args.server_cpus.clone(),
        out: args.out.clone(),
        dynamic_path: args.dynamic_path.clone(),
        cgi_path: args.cgi_path.clone(),
        server_exe: None,
        archive: keep(&args.archive),
    })
}

fn agent_options(args: &BenchAgentArgs) -> agent::Options {
    agent::Options {
        listen: args.listen.clone(),
        allow: args.allow.clone(),
        threads: args.threads,
        runs: args.runs,
    }
}

fn mail_options(args: &BenchMailArgs) -> anyhow::Result<mail::Options> {
    Ok(mail::Options {
        smtp: args.smtp.clone(),
        pop3: args.pop3.clone(),
        rate: args.rate,
        users: args.users,
        store_users: args.store_users,
        domain: args.domain.clone(),
        remote_domain: args.remote_domain.clone(),
        password: args.password.clone(),
        password_scheme: args.password_scheme,
        sink_listen: args.sink_listen.clone(),
        profile: if args.profile == "standard" {
            mail::ProfileName::Standard
        } else {
            mail::ProfileName::Quick
        },
        warmup: duration(args.warmup.as_ref(), "--warmup")?,
        run_time: duration(args.run_time.as_ref(), "--run-time")?,
        cooldown: duration(args.cooldown.as_ref(), "--cooldown")?,
        levels: args.levels.clone(),
        find_max: args.find_max,
        init_only: args.init_only,
        init_journal: args.init_journal.clone(),
        init_connections: args.init_connections,
        check_sample: args.check_sample,
        probe_share: args.probe_share,
        reply_timeout: duration(Some(&args.reply_timeout), "--reply-timeout")?
            .unwrap_or(Duration::from_secs(60)),
        threads: args.threads,
        agents: args.agents.clone(),
        drain_limit: duration(args.drain_limit.as_ref(), "--drain-limit")?,
        seed: args.seed,
        store_seed: args.store_seed,
        server_software: args.server_software.clone(),
        server_pid: args.server_pid.clone(),
        harness_cpus: args.harness_cpus.clone(),
        server_cpus: args.server_cpus.clone(),
        server_set: args.server_set.clone(),
        tiers: parse_all(&args.tier, "--tier")?,
        tier_notes: parse_all(&args.tier_note, "--tier-note")?,
        tier_counts: parse_all(&args.tier_count, "--tier-count")?,
        out: args.out.clone(),
        server_exe: None,
        archive: keep(&args.archive),
    })
}

/// Each of a repeated flag's values, parsed.
fn parse_all<T: std::str::FromStr<Err = String>>(
    values: &[String],
    flag: &str,
) -> anyhow::Result<Vec<T>> {
    values
        .iter()
        .map(|v| v.parse().map_err(|e| anyhow::anyhow!("{flag} {e}")))
        .collect()
}

fn users_options(args: &BenchMailUsersArgs) -> mail::UsersOptions {
    mail::UsersOptions {
        users: args.users,
        domain: args.domain.clone(),
        password: args.password.clone(),
        format: if args.format == "dovecot" {
            mail::UsersFormat::Dovecot
        } else {
            mail::UsersFormat::Plain
        },
        scheme: args.scheme,
        out: args.out.clone(),
    }
}

/// `stoa bench directory`: the `[directory]` of the file, opened fresh for
/// each cache mode.
fn bench_directory(args: &BenchDirectoryArgs) -> anyhow::Result<()> {
    let ldap = ldap_options(&args.config)?;
    let options = directory_options(args)?;
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
    directory::run(&options, &open).map(|_| ())
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

fn directory_options(args: &BenchDirectoryArgs) -> anyhow::Result<directory::Options> {
    let cache = args
        .cache
        .iter()
        .map(|c| {
            if c == "on" {
                directory::Cache::On
            } else {
                directory::Cache::Off
            }
        })
        .collect();
    Ok(directory::Options {
        users: args.users,
        domain: args.domain.clone(),
        concurrency: args.concurrency.iter().map(|&c| c as usize).collect(),
        duration: duration(Some(&args.duration), "--duration")?.unwrap_or_default(),
        cache,
        hot_set: args.hot_set,
        verify: args
            .verify
            .iter()
            .map(|v| directory::parse_verify(v))
            .collect::<anyhow::Result<_>>()?,
        password: args.password.clone(),
        seed: args.seed,
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    fn mail_args(extra: &[&str]) -> BenchMailArgs {
        let mut argv = vec!["stoa", "bench", "mail"];
        argv.extend_from_slice(extra);
        match crate::cli::Cli::try_parse_from(argv)
            .expect("parses")
            .command
        {
            crate::cli::Command::Bench(BenchCommand::Mail(a)) => a,
            _ => unreachable!("bench mail"),
        }
    }

    fn directory_args(extra: &[&str]) -> BenchDirectoryArgs {
        let mut argv = vec!["stoa", "bench", "directory", "--config", "d.toml"];
        argv.extend_from_slice(extra);
        match crate::cli::Cli::try_parse_from(argv)
            .expect("parses")
            .command
        {
            crate::cli::Command::Bench(BenchCommand::Directory(a)) => a,
            _ => unreachable!("bench directory"),
        }
    }

    #[test]
    fn directory_flags() {
        let o = directory_options(&directory_args(&["--users", "1500000"])).expect("defaults");
        assert_eq!(
            (o.users, o.concurrency.as_slice()),
            (1_500_000, &[1, 64][..])
        );
        assert_eq!(o.duration, Duration::from_secs(20));
        assert_eq!(o.cache, [directory::Cache::Off, directory::Cache::On]);
        let o = directory_options(&directory_args(&[
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
        ]))
        .expect("custom");
        assert_eq!(
            (o.concurrency.as_slice(), o.duration),
            (&[2][..], Duration::from_secs(1))
        );
        assert_eq!(
            (o.cache.as_slice(), o.verify.len()),
            (&[directory::Cache::On][..], 1)
        );
        let bad = ["--cache", "lukewarm"];
        let argv = [
            "stoa",
            "bench",
            "directory",
            "--config",
            "d",
            "--users",
            "1",
        ];
        assert!(crate::cli::Cli::try_parse_from(argv.iter().chain(&bad)).is_err());
        let e = directory_options(&directory_args(&["--users", "1", "--duration", "x"]));
        assert!(e.expect_err("x").to_string().starts_with("--duration x: "));
    }

    #[test]
    fn mail_durations_are_parsed_here() {
        let o = mail_options(&mail_args(&[])).expect("defaults");
        assert_eq!(o.reply_timeout, Duration::from_secs(60));
        assert_eq!((o.run_time, o.profile), (None, mail::ProfileName::Quick));
        let o = mail_options(&mail_args(&["--profile", "standard", "--run-time", "90s"]))
            .expect("custom");
        assert_eq!(
            (o.run_time, o.profile),
            (Some(Duration::from_secs(90)), mail::ProfileName::Standard)
        );
        let e = mail_options(&mail_args(&["--reply-timeout", "soon"])).expect_err("soon");
        assert!(e.to_string().starts_with("--reply-timeout soon: "), "{e}");
    }
}
