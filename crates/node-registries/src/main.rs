//! `resolvable-images-registries`: prints the policy's `registries` setting for a node's
//! registry configuration, or refuses, naming the file and line, what it cannot translate
//! exactly (exit status 1).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use node_registries::{containerd, openshift, registries_conf, Refusal, Translation, Where};

/// Prints the policy's `registries` setting for the registry configuration of the nodes.
#[derive(Parser)]
#[command(name = "resolvable-images-registries", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// containerd 2: the directories of `config_path` (in its order; a `:`-separated list as
    /// written in config.toml is split).
    CertsD {
        /// A registry that a `_default` directory applies to (repeat for each).
        #[arg(long = "default-for", value_name = "REGISTRY")]
        default_for: Vec<String>,
        /// The `certs.d` directories.
        #[arg(required = true)]
        directories: Vec<String>,
    },
    /// containerd 1.x (and 2.x without `config_path`): the CRI plugin's `mirrors` in
    /// config.toml.
    ContainerdMirrors {
        /// A registry that the `"*"` entry applies to (repeat for each).
        #[arg(long = "default-for", value_name = "REGISTRY")]
        default_for: Vec<String>,
        /// containerd's config.toml.
        config: PathBuf,
    },
    /// CRI-O / Podman: registries.conf, then its registries.conf.d drop-ins, in order.
    RegistriesConf {
        /// The files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// OpenShift: ImageDigestMirrorSet / ImageTagMirrorSet YAML (several documents, or a
    /// List, as `oc get imagedigestmirrorsets,imagetagmirrorsets -o yaml` prints).
    MirrorSets {
        /// The files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::CertsD {
            default_for,
            directories,
        } => {
            let roots: Vec<PathBuf> = directories
                .iter()
                .flat_map(|list| std::env::split_paths(list).collect::<Vec<_>>())
                .collect();
            containerd::translate(&roots, &default_for)
        }
        Command::ContainerdMirrors {
            default_for,
            config,
        } => read(std::slice::from_ref(&config)).and_then(|files| {
            let (name, text) = &files[0];
            containerd::legacy_mirrors::translate(name, text, &default_for)
        }),
        Command::RegistriesConf { files } => {
            read(&files).and_then(|f| registries_conf::translate(&f))
        }
        Command::MirrorSets { files } => read(&files).and_then(|f| openshift::translate(&f)),
    };
    match result.map(|translation| print(&translation)) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(problem)) => {
            eprintln!("error: {problem}");
            ExitCode::FAILURE
        }
        Err(refusal) => {
            eprintln!("refused: {refusal}");
            ExitCode::FAILURE
        }
    }
}

/// Each file's name and text.
fn read(files: &[PathBuf]) -> Result<Vec<(String, String)>, Refusal> {
    files
        .iter()
        .map(|path| {
            let name = path.display().to_string();
            std::fs::read_to_string(path)
                .map(|text| (name.clone(), text))
                .map_err(|e| Refusal {
                    file: name,
                    at: Where::File,
                    problem: format!("cannot read: {e}"),
                })
        })
        .collect()
}

/// The notes on standard error, the setting on standard output.
fn print(translation: &Translation) -> Result<(), serde_yaml::Error> {
    for note in &translation.notes {
        eprintln!("note: {note}");
    }
    print!("{}", translation.to_yaml()?);
    Ok(())
}
