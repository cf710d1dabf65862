//! The `cutout-gateway` binary: `demo`, `--config FILE`, and the load check's helper modes.

#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use cutout_gateway::{Gateway, demo, reload, server, upstream};

const USAGE: &str = "\
usage:
  cutout-gateway demo                     the gateway on an embedded config with two demo upstreams
  cutout-gateway --config FILE            run with a configuration file
  cutout-gateway --check --config FILE    validate a configuration file and exit
  cutout-gateway bare503 ADDR             a bare axum handler answering 503 (load-check baseline)
  cutout-gateway upstream ADDR            one healthy demo upstream (load-check target)
";

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

async fn run(args: Vec<String>) -> Result<()> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["demo"] => run_demo().await,
        ["--config", path] => run_config(path, false).await,
        ["--check", "--config", path] | ["--config", path, "--check"] => {
            run_config(path, true).await
        }
        ["bare503", addr] => serve_one("bare503", addr, cutout_gateway::bare::app()).await,
        ["upstream", addr] => {
            let up = upstream::Upstream::new("upstream");
            serve_one("upstream", addr, up.app()).await
        }
        ["-h" | "--help" | "help"] => {
            print!("{USAGE}");
            Ok(())
        }
        _ => Err(format!("unknown arguments {args:?}\n{USAGE}").into()),
    }
}

async fn run_config(path: &str, check: bool) -> Result<()> {
    // The validation every reload runs too: `--check` gives a reload's verdict.
    let config = reload::load(Path::new(path))?;
    if check {
        for warning in config
            .warnings()
            .into_iter()
            .chain(server::descriptor_warning(&config))
        {
            eprintln!("warning: {warning}");
        }
        println!(
            "{path}: valid ({} clusters, {} routes)",
            config.clusters.len(),
            config.routes.len()
        );
        return Ok(());
    }
    let gateway = Gateway::new(config);
    gateway.set_source(path);
    server::reload_on_hangup(Some(Arc::clone(&gateway)));
    server::run(gateway, server::shutdown_signal(), |proxy, admin| {
        tracing::info!(%proxy, %admin, "cutout-gateway listening");
    })
    .await
}

async fn run_demo() -> Result<()> {
    let (tx, rx) = tokio::sync::watch::channel(false);
    let demo = demo::start_upstreams(demo::DEMO_PORTS, rx).await?;
    let (account, transfer) = (demo.account.1, demo.transfer.1);
    let gateway: Arc<Gateway> = demo.gateway;
    server::reload_on_hangup(Some(Arc::clone(&gateway)));
    let result = server::run(gateway, server::shutdown_signal(), |proxy, admin| {
        println!("{}", demo::instructions(proxy, admin, account, transfer));
    })
    .await;
    let _ = tx.send(true);
    result
}

async fn serve_one(what: &'static str, addr: &str, router: axum::Router) -> Result<()> {
    let addr: SocketAddr = addr
        .parse()
        .map_err(|_| format!("not an address: {addr:?}"))?;
    server::reload_on_hangup(None);
    let listener = server::bind(what, addr).await?;
    tracing::info!(addr = %listener.local_addr()?, "{what} listening");
    server::serve(listener, router, server::shutdown_signal()).await?;
    Ok(())
}
