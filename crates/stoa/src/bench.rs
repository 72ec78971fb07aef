//! `stoa bench …`: the parsed flags turned into `stoa-bench`'s options, and the
//! harness wired to the rest of the binary (the file set comes from
//! `stoa fileset`; the built-in servers are this binary's `stoa serve`).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use stoa_bench::{agent, mail, web};
use stoa_web99::workload::HttpVersion;

use crate::cli::{
    BenchAgentArgs, BenchCommand, BenchMailArgs, BenchMailUsersArgs, BenchWebArgs, FilesetArgs,
};

/// Runs one `stoa bench` command.
pub(crate) fn run(command: &BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Web(args) => web::run(&web_options(args)?, &fileset_writer()),
        BenchCommand::Agent(args) => agent::serve(&agent_options(args)),
        BenchCommand::Mail(args) => mail::run(&mail_options(args)?),
        BenchCommand::MailUsers(args) => mail::write_users(&users_options(args)),
    }
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
        out: args.out.clone(),
        dynamic_path: args.dynamic_path.clone(),
        cgi_path: args.cgi_path.clone(),
        server_exe: None,
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
        domain: args.domain.clone(),
        remote_domain: args.remote_domain.clone(),
        password: args.password.clone(),
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
        drain_limit: duration(args.drain_limit.as_ref(), "--drain-limit")?,
        seed: args.seed,
        store_seed: args.store_seed,
        server_software: args.server_software.clone(),
        server_pid: args.server_pid.clone(),
        out: args.out.clone(),
        server_exe: None,
    })
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
        out: args.out.clone(),
    }
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
