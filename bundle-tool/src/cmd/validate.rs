//! `bundle-tool validate` (also spelled `bundle-tool bundle validate`): `operator-sdk bundle
//! validate` (`internal/cmd/operator-sdk/bundle/validate`) for one or more bundle directories,
//! plus the install-time checks OLM would fail on and, with `--previous`, CRD upgrade safety.
//!
//! The optional `suite=olm-v1` adds what OLM v1 (operator-controller) would reject or need
//! configured for each bundle (the bundle crate's OLM v1 checks, the same ones `install --olm-v1` runs).
//!
//! Every bundle is loaded first (a bundle that cannot be read becomes a `bundle-load` finding
//! and the others are still checked), then validated; the report goes to stdout as text or
//! JSON, and the exit code is 1 when any finding is an error.

use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, OutputFormat, print_data};
use olmkit_bundle::{
    Suite, ValidateOptions, load_bundle_dir, load_bundle_dir_quiet, validate_bundle,
};
use olmkit_core::{Finding, Report};
use std::path::{Path, PathBuf};

/// Arguments of `bundle-tool validate`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Bundle directories (each with manifests/ and metadata/).
    #[arg(required = true, value_name = "BUNDLE_DIR")]
    pub bundle_dirs: Vec<PathBuf>,
    /// Optional suites: suite=operatorhub (or operator-sdk's name=operatorhub),
    /// suite=good-practices, suite=all (both), suite=strict (bundle-tool's own checks, which
    /// are warnings by default, become errors) or suite=olm-v1 (what OLM v1 cannot install as
    /// it is) (repeatable, or comma-separated).
    #[arg(long = "select-optional", value_name = "suite=NAME")]
    pub select_optional: Vec<String>,
    /// Values for the optional validators, as operator-sdk: k8s-version=1.25 (the removed-APIs
    /// check of the operatorhub suite errs on APIs removed in or before it) (repeatable, or
    /// comma-separated key=value pairs).
    #[arg(long = "optional-values", value_name = "KEY=VALUE")]
    pub optional_values: Vec<String>,
    /// The previous release's bundle: also check that upgrading from it is safe (CRD stored
    /// and served versions, schema tightening) and that the new CSV upgrades from it.
    #[arg(long, value_name = "DIR")]
    pub previous: Option<PathBuf>,
    /// Report format on stdout.
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

/// Runs the command.
pub async fn run(args: Args, g: &GlobalArgs) -> Result<(), CmdError> {
    tokio::task::block_in_place(|| validate(&args, g))
}

/// Parses `--optional-values` (operator-sdk's `StringToString` flag: `k=v[,k=v...]`); only
/// `k8s-version` is used by the validators bundle-tool has, other keys are refused.
fn optional_values(args: &Args, options: &mut ValidateOptions) -> Result<(), CmdError> {
    for raw in &args.optional_values {
        for pair in raw.split(',').filter(|p| !p.trim().is_empty()) {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(
                    CmdError::msg(format!("--optional-values {pair}: expected key=value"))
                        .hint("e.g. --optional-values k8s-version=1.25"),
                );
            };
            match key.trim() {
                "k8s-version" => options.k8s_version = Some(value.trim().to_string()),
                other => {
                    return Err(
                        CmdError::msg(format!("--optional-values: unknown key {other:?}"))
                            .hint("the supported key is k8s-version (e.g. k8s-version=1.25)"),
                    );
                }
            }
        }
    }
    Ok(())
}

/// Custom OperatorHub categories from the JSON file named by `OPERATOR_BUNDLE_CATEGORIES`
/// (`{"categories": ["..."]}`), as operator-framework/api `extractCategories` reads it.
fn custom_categories() -> Result<Option<std::collections::BTreeSet<String>>, CmdError> {
    let Some(path) = std::env::var_os("OPERATOR_BUNDLE_CATEGORIES").filter(|p| !p.is_empty())
    else {
        return Ok(None);
    };
    let shown = PathBuf::from(&path).display().to_string();
    let bytes =
        olmkit_core::confine::read_named(Path::new(&path), olmkit_core::confine::MANIFEST_FILE)
            .map_err(|e| CmdError::msg(format!("OPERATOR_BUNDLE_CATEGORIES: {e}")))?;
    #[derive(serde::Deserialize)]
    struct Categories {
        categories: Vec<String>,
    }
    let parsed: Categories = serde_json::from_slice(&bytes).map_err(|e| {
        CmdError::msg(format!(
            "OPERATOR_BUNDLE_CATEGORIES: {shown}: field categories: {e}"
        ))
        .hint("the file must be JSON like {\"categories\": [\"Database\", \"Security\"]}")
    })?;
    Ok(Some(parsed.categories.into_iter().collect()))
}

fn validate(args: &Args, g: &GlobalArgs) -> Result<(), CmdError> {
    olmkit_bundle::schemas::prewarm();
    let mut options = ValidateOptions::default();
    optional_values(args, &mut options)?;
    options.categories = custom_categories()?;
    let mut olm_v1 = false;
    for sel in &args.select_optional {
        for s in sel.split(',').filter(|s| !s.trim().is_empty()) {
            let name = s
                .trim()
                .trim_start_matches("suite=")
                .trim_start_matches("name=");
            match name {
                "olm-v1" | "olmv1" => olm_v1 = true,
                _ => {
                    let other = s.trim();
                    let suites = Suite::parse_selector(other).map_err(|m| {
                        CmdError::msg(format!("--select-optional {s}: {m}")).hint(
                            "use --select-optional suite=operatorhub (or name=operatorhub), suite=good-practices, suite=strict, suite=olm-v1 or suite=all",
                        )
                    })?;
                    options.suites.extend(suites);
                }
            }
        }
    }
    let previous = match &args.previous {
        Some(p) => Some(
            load_bundle_dir(p)
                .user_hint("--previous must be the directory of the previously released bundle")?,
        ),
        None => None,
    };
    let bar = crate::output::progress(g, args.bundle_dirs.len() as u64, "validating bundles");
    let mut report = Report::new();
    let mut checked = Checked::default();
    for dir in &args.bundle_dirs {
        let shown = dir.display().to_string();
        if let Some(bundle) = sdk_scorecard_of(dir) {
            // `validate bundle/*/*/` where `generate bundle` (operator-sdk layout, bundle/) and
            // `release` (bundle/<package>/<version>/) share bundle/: the glob also names the
            // operator-sdk bundle's scorecard folder, which is not a bundle.
            eprintln!(
                "note: skipped {shown}: the scorecard tests of the operator-sdk layout bundle in {} (written by generate bundle), not a bundle; `bundle-tool validate {}` checks that one",
                bundle.display(),
                bundle.display()
            );
            bar.inc(1);
            continue;
        }
        // Its leniencies (duplicate keys...) become `yaml-syntax` findings of the report.
        match load_bundle_dir_quiet(dir) {
            Ok(bundle) => {
                checked.add(&bundle);
                let mut r = validate_bundle(&bundle, previous.as_ref(), &options);
                if olm_v1 {
                    r.extend(olmkit_catalog::olmv1::bundle_findings(&bundle));
                }
                report.extend(r.findings.into_iter().map(|mut f| {
                    f.file = Some(match f.file.take() {
                        Some(rel) => dir.join(rel).display().to_string(),
                        None => shown.clone(),
                    });
                    f
                }));
            }
            Err(e) => {
                let hint = if looks_like_catalog(dir) {
                    format!(
                        "{shown} looks like a File-Based Catalog: `opm validate {shown}` is `bundle-tool catalog validate {shown}`"
                    )
                } else {
                    "a bundle directory holds manifests/ and metadata/annotations.yaml; fix the file named above".to_string()
                };
                report.push(
                    Finding::error("bundle-load", e.to_string())
                        .file(shown)
                        .hint(hint),
                );
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    report.normalize();
    eprintln!(
        "{}",
        checked.summary(&options, olm_v1, args.previous.as_deref())
    );
    let text = match args.output {
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

/// The operator-sdk layout bundle whose `tests/scorecard` folder `dir` is (the bundle has
/// `manifests/` and `metadata/`; the folder holds scorecard configuration, not manifests).
fn sdk_scorecard_of(dir: &Path) -> Option<PathBuf> {
    let mut comps: Vec<_> = dir.components().collect();
    while comps.last() == Some(&std::path::Component::CurDir) {
        comps.pop();
    }
    let n = comps.len();
    let (tests, scorecard) = (comps.get(n.checked_sub(2)?)?, comps.get(n - 1)?);
    if tests.as_os_str() != "tests" || scorecard.as_os_str() != "scorecard" {
        return None;
    }
    let bundle: PathBuf = comps.get(..n - 2)?.iter().collect();
    let bundle = if bundle.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        bundle
    };
    (bundle.join("manifests").is_dir()
        && bundle.join("metadata").is_dir()
        && !dir.join("manifests").exists())
    .then_some(bundle)
}

/// A directory without `manifests/` holding YAML or JSON files that mention an FBC schema.
fn looks_like_catalog(dir: &Path) -> bool {
    if !dir.is_dir() || dir.join("manifests").exists() {
        return false;
    }
    walkdir::WalkDir::new(dir)
        .max_depth(3)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            let n = e.file_name().to_string_lossy();
            n.ends_with(".yaml") || n.ends_with(".yml") || n.ends_with(".json")
        })
        .take(20)
        .any(|e| {
            let mut head = [0u8; 4096];
            std::fs::File::open(e.path())
                .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
                .is_ok_and(|n| {
                    let t = String::from_utf8_lossy(head.get(..n).unwrap_or_default());
                    t.contains("olm.package")
                        || t.contains("olm.bundle")
                        || t.contains("olm.channel")
                })
        })
}

/// What one `validate` run looked at, for the one-line summary on stderr (the report itself is
/// the data on stdout): which bundles, how many manifests, which suites and rules.
#[derive(Default)]
struct Checked {
    bundles: Vec<String>,
    manifests: usize,
}

impl Checked {
    fn add(&mut self, bundle: &olmkit_bundle::Bundle) {
        self.manifests += bundle.manifests.len();
        self.bundles
            .push(match (bundle.package(), bundle.version()) {
                (Some(p), Some(v)) => format!("{p} {v}"),
                _ => bundle.root.display().to_string(),
            });
    }

    fn summary(
        &self,
        options: &ValidateOptions,
        olm_v1: bool,
        previous: Option<&std::path::Path>,
    ) -> String {
        let mut suites = vec!["default".to_string()];
        suites.extend(options.suites.iter().map(|s| s.name().to_string()));
        if olm_v1 {
            suites.push("olm-v1".into());
        }
        let rules = olmkit_bundle::validate::RULES
            .iter()
            .filter(|r| suites.iter().any(|s| s == r.suite))
            .count();
        let upgrade = match previous {
            Some(p) => format!("; CRD upgrade safety against {}", p.display()),
            None => String::new(),
        };
        // "pkg 0.1.0, 0.2.0" rather than the package name once per bundle
        let mut shown: Vec<String> = Vec::new();
        let mut last_package = "";
        for b in &self.bundles {
            match b.split_once(' ') {
                Some((p, v)) if p == last_package => shown.push(v.to_string()),
                Some((p, _)) => {
                    last_package = p;
                    shown.push(b.clone());
                }
                None => shown.push(b.clone()),
            }
        }
        format!(
            "checked {} bundle(s) ({}; {} manifests) with {rules} rules of suite(s) {}{upgrade}",
            self.bundles.len(),
            shown.join(", "),
            self.manifests,
            suites.join(", ")
        )
    }
}
