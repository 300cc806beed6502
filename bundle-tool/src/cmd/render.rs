//! `bundle-tool render`: bundle directories, catalog directories, FBC files, catalog templates,
//! and bundle or catalog images (OCI layouts `oci:DIR[:REF]`, registries) to File-Based
//! Catalog blobs on stdout, like `opm render` (operator-registry `alpha/action/render.go`) and
//! `opm alpha render-template` (`cmd/opm/alpha/template`).

use crate::cmd::common::fbc::FbcFormat;
use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, print_data};
use clap::ValueEnum;
use olmkit_catalog::declcfg::{self, DeclarativeConfig, LoadOptions, WriteFormat};
use olmkit_catalog::render::{ImageRefTemplate, RenderOptions};
use olmkit_catalog::render_opm::render_bundle;
use olmkit_catalog::template::{self, BundlesByImage};
use std::path::{Path, PathBuf};

/// Arguments of `bundle-tool render`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Bundle directories (with manifests/), catalog directories, FBC files, catalog
    /// templates (olm.template.basic, olm.semver), or bundle and catalog images: an OCI layout
    /// as oci:DIR[:REF] (as skopeo names it) or a registry reference (quay.io/x/y:v1).
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
    /// How bundle and catalog images are pulled.
    #[command(flatten)]
    pub images: ImageArgs,
    /// `alpha render-template TYPE FILE`: the template schema TYPE names.
    #[arg(skip)]
    pub template_type: Option<String>,
}

/// Pulling image inputs (`oci:DIR[:REF]` layouts and registry references).
#[derive(clap::Args, Debug, Default)]
pub struct ImageArgs {
    /// Talk plain HTTP to registries (opm render's --use-http; for a local registry without
    /// TLS).
    #[arg(long)]
    pub use_http: bool,
}

/// Arguments of `alpha render-template [TYPE] FILE` (opm's `cmd/opm/alpha/template` command:
/// the template type is read from the file's `schema` when TYPE is left out).
#[derive(clap::Args, Debug)]
pub struct TemplateArgs {
    /// `basic` or `semver` (checked against the file's schema), then the template file; or
    /// just the file.
    #[arg(required = true, num_args = 1..=2, value_name = "[TYPE] FILE")]
    pub args: Vec<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = FbcFormat::Json)]
    pub output: FbcFormat,
    /// As `render --migrate-level`.
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub migrate_level: Option<MigrateLevel>,
    /// As `render --image-ref-template`.
    #[arg(long, value_name = "TEMPLATE")]
    pub image_ref_template: Option<String>,
    /// As `render --bundles`.
    #[arg(long = "bundles", value_name = "DIR")]
    pub bundles: Vec<PathBuf>,
    /// As `render --catalog`.
    #[arg(long = "catalog", value_name = "DIR")]
    pub catalogs: Vec<PathBuf>,
}

impl TemplateArgs {
    /// The template file (the last argument).
    fn file(&self) -> PathBuf {
        PathBuf::from(self.args.last().cloned().unwrap_or_default())
    }

    /// The trees it reads (for `cli::trees_read`).
    pub fn trees(&self) -> Vec<PathBuf> {
        std::iter::once(self.file())
            .chain(self.bundles.iter().cloned())
            .chain(self.catalogs.iter().cloned())
            .collect()
    }

    /// The `render` run it is: `render FILE` with the same flags. A TYPE is kept and checked
    /// against the file when it runs.
    pub fn into_render(self) -> Args {
        let expected_type = match self.args.as_slice() {
            [t, _] => Some(t.clone()),
            _ => None,
        };
        Args {
            inputs: vec![self.file()],
            output: self.output,
            bundle_object: false,
            migrate_level: self.migrate_level,
            image_ref_template: self.image_ref_template,
            bundles: self.bundles,
            catalogs: self.catalogs,
            images: ImageArgs::default(),
            template_type: expected_type,
        }
    }
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

/// Renders one image input, as opm's `imageToDeclcfg` (operator-registry
/// `alpha/action/render.go`): pulled (from an OCI layout `oci:DIR[:REF]` or a registry) and
/// unpacked into a temporary directory through `olmkit_image::pull` (bounded, confined), then
/// a bundle image becomes one `olm.bundle` whose `image` is the reference (as opm writes
/// `bundle.BundleImage`), a catalog image its FBC.
pub fn render_image(
    given: &str,
    args: &Args,
    opts: &RenderOptions,
) -> Result<DeclarativeConfig, CmdError> {
    use olmkit_image::pull::{ImageKind, ImageSource, PullLimits};
    let source = ImageSource::parse(given).map_err(|e| {
        CmdError::msg(format!("{given}: no such file or directory, and {e}")).hint(INPUT_HINT)
    })?;
    let tmp = tempfile::Builder::new()
        .prefix("bundle-tool-render-")
        .tempdir()
        .unexpected_err()?;
    let dest = tmp.path().join("image");
    std::fs::create_dir(&dest).unexpected_err()?;
    let limits = PullLimits::default();
    let pulled = match &source {
        ImageSource::Layout { dir, name } => {
            olmkit_image::pull::unpack_from_layout(dir, name.as_deref(), &dest, &limits)
        }
        ImageSource::Registry(r) => {
            let auth = olmkit_image::auth::AuthSources::from_env()
                .user_hint("set both registry credential variables, or neither")?;
            let remote = olmkit_image::remote::RemoteOptions {
                insecure: args.images.use_http,
                auth,
                ..Default::default()
            };
            tokio::runtime::Handle::current().block_on(olmkit_image::pull::pull_from_registry(
                r, &remote, &dest, &limits,
            ))
        }
    };
    let pulled = pulled.map_err(|e| {
        let mut hints = e.hints();
        if matches!(&source, ImageSource::Registry(_)) && !args.images.use_http {
            hints.push("a local registry without TLS needs --use-http".into());
        }
        let mut err = if e.is_user_error() {
            CmdError::user(e)
        } else {
            CmdError::unexpected(e)
        };
        for h in hints {
            err = err.hint(h);
        }
        err
    })?;
    tracing::debug!(image = given, digest = %pulled.digest, files = pulled.files, "image unpacked");
    let mut cfg = DeclarativeConfig::default();
    match &pulled.kind {
        ImageKind::Bundle => {
            let b = olmkit_catalog::render_opm::load_bundle_dir_opm(&dest)
                .map_err(|e| CmdError::user(e).hint(format!("the bundle image {given} does not load; `bundle-tool validate` on its manifests says why")))?;
            let image = source.catalog_image(given);
            cfg.bundles.push(
                render_bundle(&b, &image, opts)
                    .map_err(|e| CmdError::user(e).hint(format!("the bundle image {given}")))?,
            );
        }
        ImageKind::Catalog(rel) => {
            cfg = declcfg::load_dir(&dest.join(rel), &LoadOptions::default())
                .map_err(|e| CmdError::user(e).hint(format!("the catalog of image {given}")))?;
            declcfg::opm::normalize(&mut cfg);
        }
    }
    Ok(cfg)
}

/// Whether an INPUT that is no file names an image (`oci:...`, `docker://...`, or a reference
/// with a registry or repository path).
fn looks_like_image(input: &Path) -> bool {
    let s = input.to_string_lossy();
    s.starts_with("oci:")
        || s.starts_with("docker://")
        || (s.contains('/') && olmkit_image::pull::ImageSource::parse(&s).is_ok())
}

/// opm takes a directory as a bundle when it has both manifests/ and metadata/.
fn is_bundle_dir(dir: &Path) -> bool {
    dir.join("manifests").is_dir() && dir.join("metadata").is_dir()
}

/// What `render` accepts, for errors about an input.
const INPUT_HINT: &str = "an INPUT is a bundle directory (manifests/ and metadata/), a catalog directory (YAML/JSON files of olm.package, olm.channel and olm.bundle blobs), an FBC file, a catalog template (schema olm.template.basic or olm.semver), or a bundle or catalog image (oci:DIR[:REF] for an OCI layout, or a registry reference such as quay.io/example/op-bundle:v1.0.0)";

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
        if !input.exists() && looks_like_image(input) {
            out.merge(render_image(&input.to_string_lossy(), args, &opts)?);
            continue;
        }
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
            if let Some(t) = &args.template_type {
                let schema = template::template_schema(&doc).unwrap_or_default();
                let want = match t.as_str() {
                    "basic" => template::SCHEMA_BASIC,
                    "semver" => template::SCHEMA_SEMVER,
                    other => {
                        return Err(CmdError::msg(format!("unknown template type {other:?}"))
                            .hint(
                                "TYPE is basic or semver, or leave it out: the file's schema says",
                            ));
                    }
                };
                if schema != want {
                    return Err(CmdError::msg(format!(
                        "{}: schema {schema:?} is not a {t} template ({want})",
                        input.display()
                    ))
                    .hint("leave TYPE out: the file's schema says which template it is"));
                }
            }
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
    // Image inputs are pulled on this runtime from inside the blocking section.
    let cfg = tokio::task::block_in_place(|| render_inputs(&args))?;
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
