//! `bundle-tool catalog ...`: validate a File-Based Catalog like `opm validate`, check its
//! upgrade graphs for channel switches that go nowhere, verify it against the bundle
//! directories it was rendered from, build one from bundle directories, and precompute the
//! index that makes `bundle-tool serve` and `catalog-server` start instantly on big catalogs
//! (the scanner and the index format live in `olmkit-catalog-server`).

use crate::cmd::common::fbc::FbcFormat;
use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, OutputFormat, print_data, spinner};
use olmkit_catalog::declcfg::{self, LoadOptions, load::load_dir_with_files};
use olmkit_catalog::render::{ImageRefTemplate, RenderOptions};
use olmkit_catalog::{catalog_dir, explain, graph, validate};
use olmkit_catalog_server::build::{BuildIndexError, BuildOptions, build_index};
use olmkit_catalog_server::index::{default_index_path, encode_index};
use olmkit_core::findings::{Finding, Report};
use std::path::PathBuf;
use std::time::Instant;

/// Subcommands of `bundle-tool catalog`.
#[derive(clap::Subcommand, Debug)]
pub enum CatalogCommand {
    /// Validate a catalog directory with every rule `opm validate` enforces.
    Validate(ValidateArgs),
    /// Validate, then warn about channels a user could switch to without reaching any bundle.
    Check(ValidateArgs),
    /// Check that the catalog's bundles are exactly what the bundle directories render to.
    Verify(VerifyArgs),
    /// Build a catalog from bundle directories (channels from their annotations and CSV
    /// replaces/skips/skipRange, as registry+v1 indexes did) and print it.
    FromBundles(FromBundlesArgs),
    /// Precompute the index `bundle-tool serve` and `catalog-server` start from instantly.
    Index(IndexArgs),
    /// Print an olm.package blob (default channel, description, icon), like `opm init`.
    Init(InitArgs),
    /// Ask a running catalog server (serve, catalog-server, opm serve) one api.Registry RPC.
    #[command(disable_version_flag = true)]
    Query(crate::cmd::query::Args),
}

/// Arguments of `catalog init` (`opm init`'s flags).
#[derive(clap::Args, Debug)]
pub struct InitArgs {
    /// The package name.
    #[arg(value_name = "PACKAGE")]
    pub package: String,
    /// The channel that subscriptions will default to if unspecified.
    #[arg(long, short = 'c', default_value = "", hide_default_value = true)]
    pub default_channel: String,
    /// Path to the package's icon (SVG, PNG, JPEG, GIF, WebP...).
    #[arg(long, short = 'i', value_name = "FILE")]
    pub icon: Option<PathBuf>,
    /// Path to the operator's README.md (or other documentation).
    #[arg(long, short = 'd', value_name = "FILE")]
    pub description: Option<PathBuf>,
    /// Output format (json|yaml).
    #[arg(short, long, value_enum, default_value_t = FbcFormat::Json)]
    pub output: FbcFormat,
}

/// `catalog init`: operator-registry's `cmd/opm/init` (`action.Init.Run`, then
/// `declcfg.WriteJSON`/`WriteYAML` of the one package), through `olmkit_catalog::init`.
fn run_init(a: &InitArgs) -> Result<(), CmdError> {
    use olmkit_core::confine::{MANIFEST_FILE, read_named};
    let read = |p: &Option<PathBuf>, what: &str| -> Result<Option<Vec<u8>>, CmdError> {
        p.as_deref()
            .map(|p| {
                read_named(p, MANIFEST_FILE).user_hint(format!("--{what} takes a readable file"))
            })
            .transpose()
    };
    let init = olmkit_catalog::init::Init {
        package: a.package.clone(),
        default_channel: a.default_channel.clone(),
        description: read(&a.description, "description")?,
        icon: read(&a.icon, "icon")?,
    };
    let cfg = init.config().user_hint(
        "opm init takes SVG, PNG, JPEG, GIF, WebP, BMP, TIFF or ICO icons, recognised by their content (an SVG must end with </svg> and have no `*` after its opening tag)",
    )?;
    let text = declcfg::render_config(&cfg, a.output.into()).user_err()?;
    print_data(&text).unexpected_err()
}

/// Arguments of `catalog validate` and `catalog check`.
#[derive(clap::Args, Debug)]
pub struct ValidateArgs {
    /// Catalog directory.
    #[arg(value_name = "DIR", default_value = "catalog")]
    pub dir: PathBuf,
    /// Report format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// Arguments of `catalog verify`.
#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// Catalog directory.
    #[arg(long, default_value = "catalog")]
    pub catalog_dir: PathBuf,
    /// A bundle directory or a folder of them (repeatable).
    #[arg(long = "bundles", value_name = "DIR", default_value = "bundle")]
    pub bundles: Vec<PathBuf>,
    /// Report format.
    #[arg(short, long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// Arguments of `catalog from-bundles`.
#[derive(clap::Args, Debug)]
pub struct FromBundlesArgs {
    /// A bundle directory or a folder of them (repeatable).
    #[arg(required = true, value_name = "DIR")]
    pub bundles: Vec<PathBuf>,
    /// Image reference of each bundle ({package}, {name}, {version}; opm's {{.Package}},
    /// {{.Name}}, {{.Version}} work too).
    #[arg(long, alias = "alpha-image-ref-template", value_name = "TEMPLATE")]
    pub image_ref_template: String,
    /// Embed manifests as olm.bundle.object (as opm render does) instead of one
    /// olm.csv.metadata per bundle.
    #[arg(long)]
    pub bundle_object: bool,
    /// How channels are linked: replaces-mode (the CSVs' edges) or semver-mode (each bundle
    /// replaces the next lower version). Default: the `updateGraph` of a ci.yaml next to the
    /// bundles, else replaces-mode.
    #[arg(long, value_enum)]
    pub update_graph: Option<UpdateGraphArg>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = FbcFormat::Yaml)]
    pub output: FbcFormat,
}

/// `--update-graph` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum UpdateGraphArg {
    /// The CSVs' replaces/skips/skipRange.
    ReplacesMode,
    /// Ordered by version, each replacing the next lower one.
    SemverMode,
}

fn print_report(report: &Report, format: OutputFormat) -> Result<(), CmdError> {
    let text = match format {
        OutputFormat::Text => report.render_text(),
        OutputFormat::Json => report.render_json(),
    };
    print_data(&text).unexpected_err()?;
    if report.has_errors() {
        Err(CmdError::Reported)
    } else {
        Ok(())
    }
}

const BUNDLE_DIRS_HINT: &str =
    "each DIR is a bundle directory (manifests/ and metadata/annotations.yaml) or a folder of them";
const BUNDLE_DIR_HINT: &str = "a bundle directory holds manifests/ and metadata/annotations.yaml; bundle-tool validate DIR says what is wrong";

/// `catalog verify -o json`: the report's lists under their own keys, and `clean` so that a
/// script need not check every list.
fn verify_json(report: &catalog_dir::VerifyReport) -> Result<String, CmdError> {
    let differs: Vec<serde_json::Value> = report
        .differs
        .iter()
        .map(|(bundle, diff)| serde_json::json!({ "bundle": bundle, "diff": diff }))
        .collect();
    let v = serde_json::json!({
        "clean": report.is_clean(),
        "notInCatalog": report.not_in_catalog,
        "noBundleDir": report.no_bundle_dir,
        "differs": differs,
    });
    let mut s = serde_json::to_string_pretty(&v).unexpected_err()?;
    s.push('\n');
    Ok(s)
}

fn verify_err(e: catalog_dir::VerifyCatalogError) -> CmdError {
    let hint = match &e {
        catalog_dir::VerifyCatalogError::Load(_) => {
            "pass --catalog-dir with the catalog directory; bundle-tool catalog validate DIR lists what does not load"
        }
        catalog_dir::VerifyCatalogError::Render(_) => {
            "bundle-tool validate DIR says what is wrong with the bundle directory"
        }
        catalog_dir::VerifyCatalogError::Output(_) => return CmdError::user(e),
    };
    CmdError::user(e).hint(hint)
}

/// `generate bundle` (operator-sdk's layout: `bundle/manifests`, `bundle/metadata`,
/// `bundle/tests`) and `release` (`bundle/<package>/<version>/`) both write under `bundle/`.
/// When `dir` is such an operator-sdk bundle and also holds versioned bundles, the catalog
/// is verified against the versioned ones (what `release` rendered it from), and the
/// operator-sdk bundle, the working copy `make bundle` regenerates, is left out with a note.
fn versioned_instead_of_sdk(
    dir: &std::path::Path,
    found: Vec<PathBuf>,
) -> Result<Vec<PathBuf>, CmdError> {
    if found.as_slice() != [dir.to_path_buf()] {
        return Ok(found);
    }
    let mut versioned = Vec::new();
    let entries = std::fs::read_dir(dir)
        .map_err(|e| CmdError::msg(format!("cannot read {}: {e}", dir.display())))?;
    let mut children: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                !n.starts_with('.') && !matches!(n.as_ref(), "manifests" | "metadata" | "tests")
            })
        })
        .collect();
    children.sort();
    for c in children {
        versioned.extend(
            catalog_dir::find_bundle_dirs(&c)
                .map_err(|e| CmdError::msg(format!("cannot read {}: {e}", c.display())))?,
        );
    }
    if versioned.is_empty() {
        return Ok(found);
    }
    eprintln!(
        "note: {} holds an operator-sdk layout bundle (manifests/, metadata/: generate bundle's working copy) and {} versioned bundle(s) (release's): verifying the versioned ones, which the catalog was rendered from",
        dir.display(),
        versioned.len()
    );
    Ok(versioned)
}

/// Loads and validates a catalog directory: load errors become a one-finding report.
pub fn validate_dir(
    dir: &std::path::Path,
    g: &GlobalArgs,
) -> Result<(Report, declcfg::DeclarativeConfig), CmdError> {
    let sp = spinner(g, &format!("validating {}", dir.display()));
    // What had to be read leniently (duplicate keys...) is reported here, as findings.
    let opts = LoadOptions {
        keep_warnings: true,
        ..LoadOptions::graph_only()
    };
    let loaded = load_dir_with_files(dir, &opts);
    sp.finish_and_clear();
    match loaded {
        Ok((cfg, origins)) => {
            let mut report = validate::validate(&cfg, Some(&origins));
            for w in &origins.warnings {
                let mut f = Finding::warning("yaml-syntax", w.message.clone())
                    .file(w.source_name.clone())
                    .hint("fix the YAML so that every parser reads it the same way");
                if let Some(line) = w.line {
                    f = f.path(format!("line {line}"));
                }
                report.push(f);
            }
            report.normalize();
            Ok((report, cfg))
        }
        Err(declcfg::LoadCatalogError::NotADirectory(p)) => Err(CmdError::msg(format!(
            "{}: not a catalog directory (no such directory)",
            p.display()
        ))
        .hint("pass the directory that holds the catalog's YAML/JSON files")),
        Err(e) => {
            let mut r = Report::new();
            r.push(Finding::error("load", e.to_string()).hint(
                "every file of a catalog directory (except what .indexignore excludes) must be YAML or JSON blobs with a `schema`",
            ));
            Ok((r, declcfg::DeclarativeConfig::default()))
        }
    }
}

/// Runs the command.
pub async fn run(command: CatalogCommand, g: &GlobalArgs) -> Result<(), CmdError> {
    match command {
        CatalogCommand::Index(a) => run_index(a, g).await,
        CatalogCommand::Init(a) => run_init(&a),
        CatalogCommand::Query(a) => crate::cmd::query::run(a, g).await,
        CatalogCommand::Validate(a) => {
            let (report, _) = validate_dir(&a.dir, g)?;
            print_report(&report, a.output)
        }
        CatalogCommand::Check(a) => run_check(&a, g),
        CatalogCommand::Verify(a) => run_verify(&a),
        CatalogCommand::FromBundles(a) => run_from_bundles(&a),
    }
}

/// `catalog check`: `validate`, plus the channel switches that strand a Subscription.
fn run_check(a: &ValidateArgs, g: &GlobalArgs) -> Result<(), CmdError> {
    let (mut report, cfg) = validate_dir(&a.dir, g)?;
    for pg in graph::package_graphs(&cfg) {
        for gap in explain::channel_switch_gaps(&pg) {
            report.push(
                Finding::warning(
                    "channel-switch",
                    format!(
                        "a Subscription on {} switched to channel {} stays where it is: {} cannot upgrade into {}",
                        gap.from_channel,
                        gap.to_channel,
                        gap.stranded.join(", "),
                        gap.to_channel
                    ),
                )
                .path(validate::object_path(&gap.package, Some(&gap.to_channel), None))
                .hint(gap.suggestion),
            );
        }
    }
    report.normalize();
    print_report(&report, a.output)
}

/// `catalog verify`: the catalog against the bundle directories it was rendered from.
fn run_verify(a: &VerifyArgs) -> Result<(), CmdError> {
    let mut dirs = Vec::new();
    for d in &a.bundles {
        let found = catalog_dir::find_bundle_dirs(d).map_err(|e| {
            CmdError::msg(format!("cannot read {}: {e}", d.display()))
                .hint("pass --bundles with the bundle directories the catalog was rendered from (default: ./bundle)")
                .hint(BUNDLE_DIRS_HINT)
        })?;
        for dir in versioned_instead_of_sdk(d, found)? {
            dirs.push(olmkit_bundle::load_bundle_dir(&dir).user_hint(BUNDLE_DIR_HINT)?);
        }
    }
    if dirs.is_empty() {
        // Verifying nothing must not look like a clean result.
        return Err(CmdError::msg(format!(
            "no bundle directories under {}",
            a.bundles
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .hint(BUNDLE_DIRS_HINT));
    }
    let report = catalog_dir::verify(&a.catalog_dir, &dirs).map_err(verify_err)?;
    let text = match a.output {
        OutputFormat::Text => report.render_text(),
        OutputFormat::Json => verify_json(&report)?,
    };
    print_data(&text).unexpected_err()?;
    if report.is_clean() {
        Ok(())
    } else {
        Err(CmdError::Reported)
    }
}

/// `catalog from-bundles`: renders a catalog from bundle directories, leaving out (with a
/// warning) the bundles that do not load.
fn run_from_bundles(a: &FromBundlesArgs) -> Result<(), CmdError> {
    let t = ImageRefTemplate::parse(&a.image_ref_template).user_err()?;
    let mode = match a.update_graph {
        Some(UpdateGraphArg::SemverMode) => catalog_dir::UpdateGraph::SemverMode,
        Some(UpdateGraphArg::ReplacesMode) => catalog_dir::UpdateGraph::ReplacesMode,
        None => a
            .bundles
            .iter()
            .find_map(|d| catalog_dir::UpdateGraph::from_ci_yaml(d))
            .unwrap_or_default(),
    };
    let mut bundles = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    for d in &a.bundles {
        let dirs = catalog_dir::find_bundle_dirs(d).map_err(|e| {
            CmdError::msg(format!("cannot read {}: {e}", d.display())).hint(BUNDLE_DIRS_HINT)
        })?;
        if dirs.is_empty() {
            return Err(CmdError::msg(format!(
                "{}: no bundle directory (nothing with a manifests/ folder)",
                d.display()
            ))
            .hint(BUNDLE_DIRS_HINT));
        }
        for dir in dirs {
            // One bad bundle is reported and left out; the others still load, as
            // opm renders them one by one.
            let b = match olmkit_catalog::render_opm::load_bundle_dir_opm(&dir) {
                Ok(b) => b,
                Err(e) => {
                    failed.push(format!("{}: {e}", dir.display()));
                    continue;
                }
            };
            let image = t.expand(
                b.package().unwrap_or(""),
                b.csv_name().unwrap_or(""),
                b.version().unwrap_or(""),
            );
            bundles.push((b, image));
        }
    }
    let (cfg, not_rendered) = catalog_dir::catalog_from_bundles_lenient(
        &bundles,
        &RenderOptions {
            bundle_objects: a.bundle_object,
        },
        mode,
    );
    failed.extend(
        not_rendered
            .into_iter()
            .map(|(dir, e)| format!("{}: {e}", dir.display())),
    );
    for f in &failed {
        eprintln!("warning: left out bundle {f}");
    }
    if cfg.bundles.is_empty() {
        return Err(CmdError::msg(format!(
            "no bundle could be loaded ({} failed)",
            failed.len()
        ))
        .hint(BUNDLE_DIR_HINT));
    }
    let text = declcfg::render_config(&cfg, a.output.into()).user_err()?;
    print_data(&text).unexpected_err()
}

/// Arguments of `bundle-tool catalog index`.
#[derive(clap::Args, Debug)]
pub struct IndexArgs {
    /// The catalog directory (File-Based Catalog).
    #[arg(value_name = "CONFIGS_DIR", default_value = "catalog")]
    pub configs: PathBuf,
    /// Where to write the index. Default: `<CONFIGS_DIR>/../index`, where `bundle-tool serve`
    /// and `catalog-server` look for it.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Threads used to scan the catalog (0: one per CPU).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

/// Runs `bundle-tool catalog index`.
pub async fn run_index(args: IndexArgs, g: &GlobalArgs) -> Result<(), CmdError> {
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_index_path(&args.configs));
    if out.starts_with(&args.configs) {
        return Err(CmdError::msg(format!(
            "the index {} would be inside the catalog {} and be read as part of it",
            out.display(),
            args.configs.display()
        ))
        .hint(
            "write it next to the catalog (the default) or list it in the catalog's .indexignore",
        ));
    }
    let bar = spinner(g, &format!("indexing {}", args.configs.display()));
    let started = Instant::now();
    let configs = args.configs.clone();
    let threads = args.threads;
    let built = tokio::task::spawn_blocking(move || {
        build_index(
            &configs,
            &BuildOptions {
                threads,
                checksums: true,
            },
        )
    })
    .await
    .unexpected_err()?;
    bar.finish_and_clear();
    let built = match built {
        Ok(b) => b,
        Err(BuildIndexError::Invalid { report, .. }) => {
            eprint!("{}", report.render_text());
            eprintln!(
                "error: {} cannot be served, so it was not indexed",
                args.configs.display()
            );
            return Err(CmdError::Reported);
        }
        Err(e) => {
            return Err(CmdError::user(e).hint(format!(
                "`bundle-tool catalog validate {}` shows what is wrong",
                args.configs.display()
            )));
        }
    };
    for f in &built.report.findings {
        eprintln!("warning: {}", f.message);
    }
    let bytes = encode_index(&built.index);
    // `-` is stdout, a device or FIFO is written in place; a file is replaced atomically,
    // keeping its mode (a new one is 0644 minus the umask, readable by a catalog image's
    // server user).
    crate::cmd::common::pending::write_output(&out, &bytes)?;
    let bundles = built.index.bundles.len();
    eprintln!(
        "indexed {}: {} packages, {} bundles, {} files -> {} ({} KiB) in {:.1}s",
        args.configs.display(),
        built.index.packages.len(),
        bundles,
        built.index.files.len(),
        out.display(),
        bytes.len().div_ceil(1024),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
