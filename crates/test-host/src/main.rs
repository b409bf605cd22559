//! `test-host`: a Kubewarden-compatible test host for waPC policies.
//!
//! kwctl cannot be installed where this project's tests run, so this binary
//! stands in for `kwctl run`, `kwctl annotate` and `kwctl push`: waPC on wasmtime and
//! lookups through oci-client, as policy-evaluator runs them, so that guests see the same
//! protocol, payloads and error texts.

mod allow_list;
mod annotate;
mod artifact;
mod bench;
mod call_meter;
mod callback_requests;
mod capabilities;
mod cli;
mod cluster;
mod guest_memory;
mod live;
mod metadata;
mod oci;
mod resolve_images;
mod response;
mod run;
mod runtime;
mod session;

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Parser;

use crate::allow_list::{HostCapabilitiesAllowList, KubernetesAccess};
use crate::cli::{AnnotateArgs, Cli, Command};

fn tokio_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")
}

/// A backend for `annotate`, where the guest must not reach the outside.
struct NoBackend;

impl capabilities::Backend for NoBackend {
    fn evaluate(
        &mut self,
        _request: &callback_requests::CallbackRequestType,
    ) -> anyhow::Result<Vec<u8>> {
        anyhow::bail!("host capabilities are not available while annotating")
    }
}

fn annotate_cmd(args: &AnnotateArgs) -> Result<()> {
    let module = std::fs::read(&args.wasm_path)
        .with_context(|| format!("cannot read {}", args.wasm_path.display()))?;
    let metadata = metadata::Metadata::from_yaml_path(&args.metadata_path)?;
    let usage = match &args.usage_path {
        Some(p) => Some(
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?,
        ),
        None => None,
    };
    let host = Arc::new(capabilities::HostCapabilities::new(
        HostCapabilitiesAllowList::parse(""),
        KubernetesAccess::Denied,
        Box::new(NoBackend),
    ));
    let protocol_version = runtime::PolicyRuntime::new(&module, host)?.protocol_version()?;
    let metadata = annotate::annotated_metadata(metadata, protocol_version, usage);
    let annotated = annotate::annotate_module(&module, &metadata)?;
    std::fs::write(&args.output_path, annotated)
        .with_context(|| format!("cannot write {}", args.output_path.display()))?;
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = tokio_runtime().and_then(|rt| match &cli.command {
        Command::Run(args) => run::run(args, &rt).map(|outcome| match outcome {
            run::RunOutcome::Evaluated => ExitCode::SUCCESS,
            run::RunOutcome::InvalidSettings => ExitCode::FAILURE,
        }),
        Command::Annotate(args) => annotate_cmd(args).map(|()| ExitCode::SUCCESS),
        Command::Bench(args) => bench::bench(args).map(|()| ExitCode::SUCCESS),
        Command::Push(args) => run::registry_client(
            args.sources_path.as_deref(),
            args.docker_config_json_path.as_deref(),
            args.oci_timeout_secs,
        )
        .and_then(|registry| artifact::push(&args.wasm_path, &args.destination, &rt, &registry))
        .map(|()| ExitCode::SUCCESS),
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("Error: {}", capabilities::error_chain(&e));
            ExitCode::FAILURE
        }
    }
}
