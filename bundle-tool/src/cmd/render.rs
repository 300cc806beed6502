//! `bundle-tool render`: bundle directories, catalog directories, FBC files and catalog
//! templates to File-Based Catalog blobs on stdout, like `opm render` and
//! `opm alpha render-template`.

use crate::cmd::common::fbc::FbcFormat;
use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, print_data};
use clap::ValueEnum;
use olmkit_catalog::declcfg::{self, DeclarativeConfig, LoadOptions, WriteFormat};
use olmkit_catalog::render::{ImageRefTemplate, RenderOptions, render_bundle};
use olmkit_catalog::template::{self, BundlesByImage};
use std::path::{Path, PathBuf};

/// Arguments of `bundle-tool render`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Bundle directories (with manifests/), catalog directories, FBC files or catalog
    /// templates (olm.template.basic, olm.semver).
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = FbcFormat::Json)]
    pub output: FbcFormat,
    /// Embed every manifest as olm.bundle.object (the default, as opm 1.73 does).
    #[arg(long, conflicts_with = "migrate_level")]
    pub bundle_object: bool,
    /// Migrations of rendered bundle directories, like opm's flag: bundle-object-to-csv-metadata
    /// replaces the olm.bundle.object properties with one olm.csv.metadata.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub migrate_level: Option<MigrateLevel>,
    /// Image reference of rendered bundle directories, with {package}, {name} and {version}
    /// (e.g. quay.io/example/{package}-bundle:v{version}; opm's {{.Package}}, {{.Name}} and
    /// {{.Version}} work too). Without it the image is "", as with opm.
    #[arg(long, alias = "alpha-image-ref-template", value_name = "TEMPLATE")]
    pub image_ref_template: Option<String>,
    /// Bundle directories (or folders of them) that templates may reference by image; their
    /// images come from --image-ref-template.
    #[arg(long = "bundles", value_name = "DIR")]
    pub bundles: Vec<PathBuf>,
    /// Catalogs whose bundles templates may reference by image.
    #[arg(long = "catalog", value_name = "DIR")]
    pub catalogs: Vec<PathBuf>,
}

/// Migrations `--migrate-level` knows (opm's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MigrateLevel {
    /// Replace olm.bundle.object properties with one olm.csv.metadata.
    BundleObjectToCsvMetadata,
}

/// The bundle image template, if one was given.
fn template_for(args: &Args) -> Result<Option<ImageRefTemplate>, CmdError> {
    args.image_ref_template
        .as_deref()
        .map(|t| ImageRefTemplate::parse(t).user_err())
        .transpose()
}

/// A template is required where bundles are looked up by image.
fn required_template(args: &Args) -> Result<ImageRefTemplate, CmdError> {
    template_for(args)?.ok_or_else(|| {
        CmdError::msg("bundle directories given with --bundles need an image reference")
            .hint("pass --image-ref-template, e.g. --image-ref-template 'quay.io/example/{package}-bundle:v{version}'")
    })
}

/// Render options of the command line (opm's defaults).
fn render_options(args: &Args) -> RenderOptions {
    RenderOptions {
        bundle_objects: args.migrate_level != Some(MigrateLevel::BundleObjectToCsvMetadata),
    }
}

/// Renders one bundle directory with the image from the template ("" without one).
pub fn render_bundle_dir(
    dir: &Path,
    template: Option<&ImageRefTemplate>,
    opts: &RenderOptions,
) -> Result<declcfg::Bundle, CmdError> {
    let check = || format!("bundle-tool validate {} says what is wrong", dir.display());
    let b = olmkit_catalog::render_opm::load_bundle_dir_opm(dir).user_hint(check())?;
    let (Some(package), Some(name), Some(version), Some(template)) =
        (b.package(), b.csv_name(), b.version(), template)
    else {
        // render_bundle names a missing field precisely.
        return render_bundle(&b, "", opts).user_hint(check());
    };
    let image = template.expand(package, name, version);
    render_bundle(&b, &image, opts).user_hint(check())
}

/// opm takes a directory as a bundle when it has both manifests/ and metadata/.
fn is_bundle_dir(dir: &Path) -> bool {
    dir.join("manifests").is_dir() && dir.join("metadata").is_dir()
}

/// What `render` accepts, for errors about an input.
const INPUT_HINT: &str = "an INPUT is a bundle directory (manifests/ and metadata/), a catalog directory (YAML/JSON files of olm.package, olm.channel and olm.bundle blobs), an FBC file, or a catalog template (schema olm.template.basic or olm.semver)";

/// A directory without manifests/ is read as a catalog, which may not be what was meant.
fn catalog_dir_hint(dir: &Path) -> String {
    format!(
        "{} has no manifests/ and metadata/ folders, so it is read as a catalog directory (as opm does): every file in it (except what .indexignore excludes) must be YAML or JSON blobs with a `schema`; a bundle directory holds manifests/ and metadata/annotations.yaml",
        dir.display()
    )
}

fn is_template_file(path: &Path) -> Result<Option<serde_json::Value>, CmdError> {
    use olmkit_core::confine::{MANIFEST_FILE, open_named};
    let file = open_named(path).user_hint(INPUT_HINT)?;
    // A file too large to be a template is a catalog file: not read here.
    if file.check_size(MANIFEST_FILE).is_err() {
        return Ok(None);
    }
    let bytes = file.read_to_end(MANIFEST_FILE).user_hint(INPUT_HINT)?;
    let name = path.display().to_string();
    let docs = olmkit_core::docs::parse_documents(&name, &bytes).user_hint(INPUT_HINT)?;
    match docs.as_slice() {
        [one]
            if matches!(
                template::template_schema(one),
                Some(template::SCHEMA_BASIC) | Some(template::SCHEMA_SEMVER)
            ) =>
        {
            Ok(docs.into_iter().next())
        }
        _ => Ok(None),
    }
}

/// Renders every input into one catalog.
pub fn render_inputs(args: &Args) -> Result<DeclarativeConfig, CmdError> {
    let opts = render_options(args);
    let mut out = DeclarativeConfig::default();
    let mut source: Option<BundlesByImage> = None;
    for input in &args.inputs {
        if !input.exists() {
            return Err(
                CmdError::msg(format!("{}: no such file or directory", input.display()))
                    .hint(INPUT_HINT),
            );
        }
        if input.is_dir() && is_bundle_dir(input) {
            out.bundles.push(render_bundle_dir(
                input,
                template_for(args)?.as_ref(),
                &opts,
            )?);
        } else if input.is_dir() {
            let mut cfg = declcfg::load_dir(input, &LoadOptions::default())
                .user_hint(catalog_dir_hint(input))?;
            // opm decodes and re-encodes what it prints (see declcfg::opm); rendered bundle
            // directories already come out that way.
            declcfg::opm::normalize(&mut cfg);
            out.merge(cfg);
        } else if let Some(doc) = is_template_file(input)? {
            if source.is_none() {
                source = Some(bundle_source(args, &opts)?);
            }
            let src = source
                .as_ref()
                .ok_or_else(|| CmdError::msg("no bundle source"))?;
            let mut cfg = template::render_template(&input.display().to_string(), &doc, src)
                .user_hint("templates name bundles by image: pass --bundles DIR with --image-ref-template, or --catalog DIR, so that bundle-tool can find them")?;
            declcfg::opm::normalize(&mut cfg);
            out.merge(cfg);
        } else if input.is_file() {
            let name = input.display().to_string();
            let mut cfg = DeclarativeConfig::default();
            for at in
                declcfg::load_file(input, &name, &LoadOptions::default()).user_hint(INPUT_HINT)?
            {
                cfg.push(at.blob);
            }
            declcfg::opm::normalize(&mut cfg);
            out.merge(cfg);
        } else {
            return Err(
                CmdError::msg(format!("{}: not a file or directory", input.display()))
                    .hint(INPUT_HINT),
            );
        }
    }
    Ok(out)
}

const BUNDLES_HINT: &str = "--bundles takes bundle directories (manifests/ and metadata/annotations.yaml) or a folder of them";

fn bundle_source(args: &Args, opts: &RenderOptions) -> Result<BundlesByImage, CmdError> {
    let mut src = BundlesByImage::default();
    for c in &args.catalogs {
        let cfg = declcfg::load_dir(c, &LoadOptions::default())
            .user_hint("--catalog takes a catalog directory (YAML/JSON files of FBC blobs); bundle-tool catalog validate DIR lists what does not load")?;
        src.extend(cfg.bundles);
    }
    if !args.bundles.is_empty() {
        let t = required_template(args)?;
        for d in &args.bundles {
            let dirs = olmkit_catalog::catalog_dir::find_bundle_dirs(d).map_err(|e| {
                CmdError::msg(format!("cannot read {}: {e}", d.display())).hint(BUNDLES_HINT)
            })?;
            if dirs.is_empty() {
                return Err(CmdError::msg(format!(
                    "{}: no bundle directory (nothing with a manifests/ folder)",
                    d.display()
                ))
                .hint(BUNDLES_HINT));
            }
            for dir in dirs {
                src.extend([render_bundle_dir(&dir, Some(&t), opts)?]);
            }
        }
    }
    Ok(src)
}

/// Runs the command.
pub async fn run(args: Args, _g: &GlobalArgs) -> Result<(), CmdError> {
    // One catalog directory: render it package by package, so memory stays at a few packages
    // whatever the catalog's size (the output bytes are the same).
    if let [dir] = args.inputs.as_slice()
        && dir.is_dir()
        && !is_bundle_dir(dir)
    {
        return tokio::task::block_in_place(|| render_catalog_dir(dir, &args));
    }
    let cfg = render_inputs(&args)?;
    write_streaming(cfg, args.output.into())
}

/// Why streaming a catalog directory to stdout stopped.
#[derive(Debug)]
enum StreamError {
    Catalog(declcfg::stream::RenderCatalogDirError),
    Stdout(std::io::Error),
}

impl From<declcfg::stream::RenderCatalogDirError> for StreamError {
    fn from(e: declcfg::stream::RenderCatalogDirError) -> Self {
        StreamError::Catalog(e)
    }
}

fn render_catalog_dir(dir: &Path, args: &Args) -> Result<(), CmdError> {
    use declcfg::stream::{RenderCatalogDirError, render_dir_streaming};
    let result = render_dir_streaming(
        dir,
        &LoadOptions::default(),
        args.output.into(),
        |chunk: Vec<u8>| {
            // Blobs are rendered from Strings: the bytes are UTF-8.
            print_data(&String::from_utf8_lossy(&chunk)).map_err(StreamError::Stdout)
        },
    );
    match result {
        Ok(mode) => {
            tracing::debug!(?mode, dir = %dir.display(), "catalog rendered");
            Ok(())
        }
        Err(StreamError::Catalog(RenderCatalogDirError::Load(e))) => {
            Err(CmdError::user(e).hint(catalog_dir_hint(dir)))
        }
        // What opm cannot print either (go-yaml refuses some characters): bad input.
        Err(StreamError::Catalog(e @ RenderCatalogDirError::Render(_))) => Err(CmdError::user(e)),
        Err(StreamError::Catalog(e)) => Err(CmdError::unexpected(e)),
        Err(StreamError::Stdout(e)) => Err(CmdError::unexpected(e)),
    }
}

/// Writes blobs to stdout package by package (rendered in parallel), so that a 1.6 GB catalog
/// is never held twice in memory.
pub fn write_streaming(cfg: DeclarativeConfig, format: WriteFormat) -> Result<(), CmdError> {
    declcfg::write::write_config_parallel(cfg, format, |chunk: Vec<u8>| {
        let text =
            String::from_utf8(chunk).map_err(|e| olmkit_core::docs::RenderDocumentError {
                what: "catalog".into(),
                message: e.to_string(),
            })?;
        print_data(&text).map_err(|e| olmkit_core::docs::RenderDocumentError {
            what: "stdout".into(),
            message: e.to_string(),
        })
    })
    .map_err(|e| {
        if e.what == "stdout" {
            CmdError::unexpected(e)
        } else {
            // What opm cannot print either (go-yaml refuses some characters): bad input.
            CmdError::user(e)
        }
    })
}
