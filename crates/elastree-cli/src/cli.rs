//! Command-line arguments (clap derive) and the dispatch of each subcommand.
//!
//! Exit codes: 0 on success, 1 on an I/O error (or a benchmark measurement that failed its
//! result check, or a local cluster that fails), 2 on bad arguments (clap's usage errors, an
//! unknown experiment), an index that cannot be built with the options given, or a missing
//! redis-server for `elastree cluster`.

use std::io::{self, IsTerminal};
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use elastree::hybrid::MergeTrigger;
use elastree::{
    BTreeOptions, BwTreeOptions, ElasticOptions, HybridOptions, Index, IndexBuilder, IndexKind,
    KeyLen, PageOrganization, SeqTreeOptions, DEFAULT_MAX_KEY_LEN,
};
use elastree_bench::cli::BenchArgs;
use elastree_bench::repro::ReproArgs;
use elastree_dist::{reachable, DistKind, DistOptions};

use std::sync::Arc;

use elastree::table::KeySource;

use crate::cluster::ClusterArgs;
use crate::kind::KindArg;
use crate::shell::{run_shell_with_table, ShellTable};

/// Exit code for an index that cannot be built (the same as clap's usage errors).
pub const EXIT_BAD_CONFIG: u8 = 2;

/// The `elastree` command line.
#[derive(Debug, Parser)]
#[command(
    name = "elastree",
    version,
    about = "In-memory ordered indexes for database systems",
    propagate_version = true
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: CliCommand,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum CliCommand {
    /// Run index commands read from stdin, one per line (put, get, del, scan, rscan, range,
    /// len, mem, check; type `help` in the shell for the protocol).
    Shell(ShellArgs),

    /// Measure elastree's index kinds and the peer indexes side by side (load, lookup, scan,
    /// delete throughput and bytes per key) and print a table; `--quick` for a run of seconds.
    Bench(BenchArgs),

    /// Run a named experiment and write a Markdown report with a table, PNG plots and the
    /// raw rows into results/<EXPERIMENT>/ (or --out).
    Repro(ReproArgs),

    /// Run a local Redis Cluster for the distributed index: up, status, add-master, kill,
    /// down (needs redis-server and redis-cli).
    Cluster(ClusterArgs),
}

/// Arguments of `elastree shell`.
#[derive(Debug, Clone, Args)]
pub struct ShellArgs {
    /// The index to run the commands against.
    #[command(flatten)]
    pub index: IndexArgs,

    /// Load the index with the pairs in this file first, one `KEY TID` per line (keys as in
    /// `put`): how a `static` index gets its contents, bulk-loaded; other kinds insert them.
    #[arg(long, value_name = "FILE")]
    pub load: Option<std::path::PathBuf>,

    /// The Redis Cluster of a distributed index (`--index dist` or `dist-baseline`), as
    /// host:port of any of its nodes (`elastree cluster up` prints one). Required for those
    /// kinds, refused for the others.
    #[arg(long, value_name = "ADDR")]
    pub cluster: Option<String>,

    /// Distributed kinds: the name of the index on the cluster, opened if it exists and
    /// created if not (letters, digits, `_`, `-`). Default `shell`.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// Distributed kinds: seconds one command may take, retries during a failover included,
    /// before it fails with `ERR cluster unavailable`. Default 10.
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<f64>,
}

/// The default `--name` of a distributed index in the shell.
pub const DEFAULT_SHELL_INDEX_NAME: &str = "shell";

impl ShellArgs {
    /// Checks the options that depend on the kind: `--cluster` is required for the
    /// distributed kinds and refused (with `--name` and `--timeout`) for the others, whose
    /// node and memory options the distributed kinds refuse in turn.
    pub fn validate(&self) -> Result<(), String> {
        let kind = self.index.index;
        if kind.dist().is_none() {
            let cluster_only = [
                ("--cluster", self.cluster.is_some()),
                ("--name", self.name.is_some()),
                ("--timeout", self.timeout.is_some()),
            ];
            if let Some((flag, _)) = cluster_only.iter().find(|(_, given)| *given) {
                return Err(format!(
                    "{flag} is only for the distributed kinds (--index {}), not {kind}",
                    DistKind::ALL
                        .iter()
                        .map(|k| k.name())
                        .collect::<Vec<_>>()
                        .join(" or ")
                ));
            }
            return Ok(());
        }
        if self.cluster.is_none() {
            return Err(format!(
                "--index {kind} needs --cluster HOST:PORT, the address of a node of a Redis \
                 Cluster (start a local one with `elastree cluster up`)"
            ));
        }
        let a = &self.index;
        let local_only = [
            ("--key-len", a.key_len.is_some()),
            ("--inner-capacity", a.inner_capacity.is_some()),
            ("--budget", a.budget.is_some()),
            ("--merge-ratio", a.merge_ratio.is_some()),
            ("--min-merge", a.min_merge.is_some()),
            ("--pages", a.pages.is_some()),
            ("--page-bytes", a.page_bytes.is_some()),
        ];
        if let Some((flag, _)) = local_only.iter().find(|(_, given)| *given) {
            return Err(format!(
                "{flag} does not apply to the distributed {kind} index"
            ));
        }
        match self.timeout {
            Some(secs) if !(secs.is_finite() && secs > 0.0) => Err(format!(
                "--timeout must be a positive number of seconds, got {secs}"
            )),
            _ => Ok(()),
        }
    }

    /// The options of the distributed index these arguments open: `--name`, uniqueness,
    /// `--max-key-len`, `--leaf-capacity` as the node capacity, `--timeout`.
    pub fn dist_options(&self) -> DistOptions {
        let mut options = DistOptions {
            name: self
                .name
                .clone()
                .unwrap_or_else(|| DEFAULT_SHELL_INDEX_NAME.to_string()),
            unique: !self.index.non_unique,
            max_key_len: self.index.max_key_len,
            ..DistOptions::default()
        };
        if let Some(entries) = self.index.leaf_capacity {
            options.node_capacity = entries;
        }
        if let Some(secs) = self.timeout {
            options.router.op_timeout = Duration::from_secs_f64(secs);
        }
        options
    }

    /// Connects to the distributed index, or prints why it cannot and returns the exit code
    /// to end with. An address nothing listens on is reported at once; a cluster that does
    /// not answer, within `--timeout`.
    pub fn connect_dist(&self) -> Result<Box<dyn Index>, ExitCode> {
        let kind = self.index.index;
        let seed = self.cluster.clone().unwrap_or_default();
        let fail = |what: String| {
            eprintln!("elastree: cannot open the {kind} index on the cluster at {seed}: {what}");
            ExitCode::from(EXIT_BAD_CONFIG)
        };
        let options = self.dist_options();
        reachable(&seed, options.router.connect_timeout).map_err(|e| fail(e.to_string()))?;
        let seeds = [seed.clone()];
        let dist = kind.dist().unwrap_or(DistKind::Tree);
        let opened = elastree_dist::open(dist, &seeds, options);
        opened
            .map(|client| client as Box<dyn Index>)
            .map_err(|e| fail(e.to_string()))
    }
}

/// The options that choose and configure an index; shared by every subcommand that builds
/// one.
#[derive(Debug, Clone, Args)]
pub struct IndexArgs {
    /// The index kind (`dist` and `dist-baseline` live on a Redis Cluster: see `--cluster`).
    #[arg(long, value_name = "KIND", default_value_t = KindArg::default(), value_parser = index_kind_parser())]
    pub index: KindArg,

    /// Build a non-unique (secondary) index: a key maps to a set of tids.
    #[arg(long)]
    pub non_unique: bool,

    /// The longest key accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_KEY_LEN)]
    pub max_key_len: usize,

    /// Every key has exactly this many bytes (8 and 16 select integer-compared layouts;
    /// sbtree takes 8 or 16 and defaults to 8).
    #[arg(long, value_name = "BYTES")]
    pub key_len: Option<usize>,

    /// The most entries a leaf node holds (default: the kind's; for the distributed kinds,
    /// the entries of every tree node, default 64).
    #[arg(long, value_name = "ENTRIES")]
    pub leaf_capacity: Option<usize>,

    /// The most separators an inner node holds (default: the kind's).
    #[arg(long, value_name = "ENTRIES")]
    pub inner_capacity: Option<usize>,

    /// The byte budget of the elastic kind (e.g. 64M, 1G, or plain bytes).
    #[arg(long, value_name = "BYTES", value_parser = elastree_bench::peers::parse_bytes)]
    pub budget: Option<usize>,

    /// Hybrid kinds: merge when the static stage holds at most this many times the dynamic
    /// stage's entries (default 10, the paper's).
    #[arg(long, value_name = "RATIO")]
    pub merge_ratio: Option<f64>,

    /// Hybrid kinds: never merge a dynamic stage of fewer entries than this (default 4096).
    #[arg(long, value_name = "ENTRIES")]
    pub min_merge: Option<usize>,

    /// The btree and bwtree kinds: how nodes of variable-length keys are laid out
    /// (`prefix-split`, the default: optimized pages with the keys' common prefix factored
    /// out, split for long prefixes and short separators; `prefix`: the same pages split in
    /// the middle; `base`: btree slotted nodes, bwtree pages of whole keys split in the
    /// middle).
    #[arg(long, value_name = "ORGANIZATION", value_parser = page_organization_parser())]
    pub pages: Option<PageOrganization>,

    /// The btree kind in optimized pages and the bwtree kind: bytes of a leaf and of an
    /// inner page (default 4K).
    #[arg(long, value_name = "BYTES", value_parser = elastree_bench::peers::parse_bytes)]
    pub page_bytes: Option<usize>,
}

/// Parses `--pages`, listing the organizations as its possible values.
fn page_organization_parser() -> impl TypedValueParser<Value = PageOrganization> {
    PossibleValuesParser::new(PageOrganization::ALL.iter().map(|o| o.name()))
        .try_map(|name| name.parse::<PageOrganization>().map_err(|e| e.to_string()))
}

/// Parses `--index` with [`KindArg::from_str`], listing every kind as the possible values
/// in `--help` and in error messages.
fn index_kind_parser() -> impl TypedValueParser<Value = KindArg> {
    PossibleValuesParser::new(KindArg::all().map(KindArg::name))
        .try_map(|name| KindArg::from_str(&name))
}

impl IndexArgs {
    /// The builder these options describe for the library's `kind`; the kinds with
    /// indirect keys load them from `table`. A kind's own option given to another kind is
    /// refused, as is the elastic kind without `--budget`.
    pub fn builder(
        &self,
        kind: IndexKind,
        table: Arc<dyn KeySource>,
    ) -> Result<IndexBuilder, String> {
        let hybrid_kind = matches!(kind, IndexKind::Hybrid | IndexKind::HybridCompressed);
        if self.budget.is_some() && kind != IndexKind::Elastic {
            return Err(format!(
                "--budget applies to the elastic kind only, not {kind}"
            ));
        }
        if (self.merge_ratio.is_some() || self.min_merge.is_some()) && !hybrid_kind {
            return Err(format!(
                "--merge-ratio and --min-merge apply to the hybrid kinds only, not {kind}"
            ));
        }
        if (self.pages.is_some() || self.page_bytes.is_some())
            && !matches!(kind, IndexKind::BTree | IndexKind::BwTree)
        {
            return Err(format!(
                "--pages and --page-bytes apply to the btree and bwtree kinds only, not {kind}"
            ));
        }
        if kind == IndexKind::BTree
            && self.page_bytes.is_some()
            && self.pages == Some(PageOrganization::Base)
        {
            return Err(
                "--page-bytes applies to optimized pages, not the btree's --pages base".into(),
            );
        }
        let builder = match kind {
            IndexKind::Elastic => {
                let budget = self.budget.ok_or(
                    "the elastic kind keeps to a byte budget: give it with --budget BYTES \
                     (e.g. 64M)",
                )?;
                IndexBuilder::new(ElasticOptions::new(budget, table))
            }
            IndexKind::SeqTree => IndexBuilder::new(SeqTreeOptions::new(table)),
            _ if hybrid_kind => {
                let mut hybrid = HybridOptions::default().for_kind(kind);
                if let Some(ratio) = self.merge_ratio {
                    hybrid.trigger = MergeTrigger::Ratio(ratio);
                }
                if let Some(entries) = self.min_merge {
                    hybrid.min_merge = entries;
                }
                IndexBuilder::new(hybrid)
            }
            IndexKind::BTree => {
                let mut options = BTreeOptions {
                    pages: self.pages,
                    ..BTreeOptions::default()
                };
                if let Some(bytes) = self.page_bytes {
                    options.leaf_page_bytes = bytes;
                    options.inner_page_bytes = bytes;
                }
                IndexBuilder::new(options)
            }
            IndexKind::BwTree => {
                let mut options = BwTreeOptions::default();
                if let Some(pages) = self.pages {
                    options.pages = pages;
                }
                if let Some(bytes) = self.page_bytes {
                    options.leaf_page_bytes = bytes;
                    options.inner_page_bytes = bytes;
                }
                IndexBuilder::new(options)
            }
            _ => IndexBuilder::new(kind),
        };
        let key_len = self.key_len.map_or(kind.default_key_len(), KeyLen::Fixed);
        let mut builder = builder
            .unique(!self.non_unique)
            .max_key_len(self.max_key_len)
            .key_len(key_len);
        if let Some(entries) = self.leaf_capacity {
            builder = builder.leaf_capacity(entries);
        }
        if let Some(entries) = self.inner_capacity {
            builder = builder.inner_capacity(entries);
        }
        Ok(builder)
    }

    /// Builds the library's `kind` for a shell session, the kinds with indirect keys over
    /// `table`, holding `pairs` (sorted, from `--load`) if given; or prints why it cannot on
    /// stderr and returns the exit code to end with.
    pub fn build_for_shell(
        &self,
        kind: IndexKind,
        table: &Arc<ShellTable>,
        pairs: Option<Vec<(Vec<u8>, u64)>>,
    ) -> Result<Box<dyn Index>, ExitCode> {
        let fail = |what: &str, err: &dyn std::fmt::Display| {
            eprintln!("elastree: cannot {what} the {kind} index: {err}");
            ExitCode::from(EXIT_BAD_CONFIG)
        };
        let builder = self
            .builder(kind, table.clone() as Arc<dyn KeySource>)
            .map_err(|msg| fail("build", &msg))?;
        let Some(pairs) = pairs else {
            return builder.build().map_err(|err| fail("build", &err));
        };
        if kind.needs_key_source() {
            table.preload(&pairs).map_err(|msg| fail("load", &msg))?;
        }
        builder
            .build_sorted(&mut pairs.into_iter())
            .map_err(|err| fail("load", &err))
    }
}

/// Runs a parsed command line and returns the process's exit code.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        CliCommand::Shell(args) => shell(&args),
        CliCommand::Bench(args) => elastree_bench::cli::run(&args, "elastree bench"),
        CliCommand::Repro(args) => elastree_bench::repro::run(&args, &command_line()),
        CliCommand::Cluster(args) => crate::cluster::run(&args),
    }
}

/// The command line as typed, with the program's path shortened to its file name, each
/// argument quoted for a POSIX shell when it needs it (for the report of `elastree repro`).
fn command_line() -> String {
    let mut args = std::env::args_os();
    let program = args
        .next()
        .as_deref()
        .and_then(|p| {
            std::path::Path::new(p)
                .file_name()
                .map(|f| f.to_os_string())
        })
        .map_or_else(
            || "elastree".to_string(),
            |f| f.to_string_lossy().into_owned(),
        );
    std::iter::once(program)
        .chain(args.map(|a| shell_quote(&a.to_string_lossy())))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Quotes `arg` for a POSIX shell unless it consists of safe characters only.
fn shell_quote(arg: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !arg.is_empty() && arg.chars().all(safe) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// Inserts the `--load` pairs (if any) into a distributed index, one by one.
fn insert_pairs(
    index: Box<dyn Index>,
    pairs: Option<Vec<(Vec<u8>, u64)>>,
    kind: KindArg,
) -> Result<Box<dyn Index>, ExitCode> {
    for (key, tid) in pairs.into_iter().flatten() {
        if let Err(err) = index.insert(&key, tid) {
            eprintln!("elastree: cannot load the {kind} index: {err}");
            return Err(ExitCode::from(EXIT_BAD_CONFIG));
        }
    }
    Ok(index)
}

/// `elastree shell`: the line protocol of [`crate::shell`] on stdin and stdout.
fn shell(args: &ShellArgs) -> ExitCode {
    if let Err(msg) = args.validate() {
        eprintln!("elastree shell: {msg}");
        return ExitCode::from(EXIT_BAD_CONFIG);
    }
    let table = Arc::new(ShellTable::default());
    let pairs = match &args.load {
        None => None,
        Some(path) => {
            let parsed = std::fs::read_to_string(path)
                .map_err(|e| e.to_string())
                .and_then(|text| crate::shell::parse_pairs(&text, !args.index.non_unique));
            match parsed {
                Ok(pairs) => Some(pairs),
                Err(msg) => {
                    eprintln!("elastree: cannot load {}: {msg}", path.display());
                    return ExitCode::from(EXIT_BAD_CONFIG);
                }
            }
        }
    };
    let built = match args.index.index {
        KindArg::Dist(_) => args
            .connect_dist()
            .and_then(|index| insert_pairs(index, pairs, args.index.index)),
        KindArg::Local(kind) => args.index.build_for_shell(kind, &table, pairs),
    };
    let index = match built {
        Ok(index) => index,
        Err(code) => return code,
    };
    let stdin = io::stdin();
    let interactive = stdin.is_terminal();
    if interactive {
        eprintln!(
            "elastree shell: {} index ({}); type help for the commands",
            args.index.index,
            if index.is_unique() {
                "unique"
            } else {
                "non-unique"
            }
        );
    }
    let indirect = matches!(args.index.index, KindArg::Local(kind) if kind.needs_key_source());
    let table = indirect.then_some(&*table);
    match run_shell_with_table(
        &*index,
        table,
        stdin.lock(),
        io::stdout().lock(),
        interactive,
    ) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`elastree shell < script | head`): nothing left to say.
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("elastree: shell: {err}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn shell_args(argv: &[&str]) -> ShellArgs {
        match Cli::try_parse_from(argv).unwrap().command {
            CliCommand::Shell(args) => args,
            other => panic!("not a shell command: {other:?}"),
        }
    }

    #[test]
    fn bench_takes_the_benchmark_options() {
        let cli = Cli::try_parse_from([
            "elastree",
            "bench",
            "--quick",
            "--n",
            "5K",
            "--index",
            "btree,btreemap",
            "--csv",
            "out.csv",
        ])
        .unwrap();
        let CliCommand::Bench(args) = cli.command else {
            panic!("not bench");
        };
        let cfg = args.config().unwrap();
        assert_eq!(cfg.n, 5_000);
        assert_eq!(cfg.indexes.len(), 2);
        assert_eq!(args.csv.as_deref(), Some(std::path::Path::new("out.csv")));
    }

    #[test]
    fn repro_takes_a_known_experiment_only() {
        let cli =
            Cli::try_parse_from(["elastree", "repro", "btree-baseline", "--scale", "0.5"]).unwrap();
        let CliCommand::Repro(args) = cli.command else {
            panic!("not repro");
        };
        assert_eq!(args.experiment, "btree-baseline");
        assert_eq!(args.scale, 0.5);
        let err = Cli::try_parse_from(["elastree", "repro", "nope"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("btree-baseline"), "{err}");
    }

    #[test]
    fn shell_quoting() {
        assert_eq!(shell_quote("--scale"), "--scale");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn shell_options_map_to_the_builder() {
        let args = shell_args(&[
            "elastree",
            "shell",
            "--index",
            "btree",
            "--non-unique",
            "--max-key-len",
            "4",
            "--key-len",
            "4",
            "--leaf-capacity",
            "8",
            "--inner-capacity",
            "6",
        ]);
        let index = args.index;
        assert_eq!(index.index, KindArg::Local(IndexKind::BTree));
        assert!(index.non_unique);
        assert_eq!(index.max_key_len, 4);
        assert_eq!(index.key_len, Some(4));
        assert_eq!(index.leaf_capacity, Some(8));
        assert_eq!(index.inner_capacity, Some(6));
        let table = Arc::new(ShellTable::default());
        let builder = format!("{:?}", index.builder(IndexKind::BTree, table).unwrap());
        assert!(builder.contains("unique: false"), "{builder}");
        assert!(builder.contains("Fixed(4)"), "{builder}");
    }

    #[test]
    fn index_defaults_to_btree() {
        let args = shell_args(&["elastree", "shell"]);
        assert_eq!(args.index.index, KindArg::Local(IndexKind::BTree));
        assert!(!args.index.non_unique);
        assert_eq!(args.index.max_key_len, DEFAULT_MAX_KEY_LEN);
    }

    #[test]
    fn unknown_index_kind_is_a_usage_error_listing_the_kinds() {
        let err = Cli::try_parse_from(["elastree", "shell", "--index", "nope"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let msg = err.to_string();
        for kind in IndexKind::ALL {
            assert!(msg.contains(kind.name()), "{msg}");
        }
    }

    #[test]
    fn help_lists_every_kind() {
        let help = Cli::command()
            .find_subcommand_mut("shell")
            .unwrap()
            .render_help()
            .to_string();
        for kind in IndexKind::ALL {
            assert!(help.contains(kind.name()), "{help}");
        }
        assert!(help.contains("--non-unique"), "{help}");
    }
}
