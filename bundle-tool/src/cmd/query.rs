//! `bundle-tool catalog query`: ask a running catalog server (`bundle-tool serve`,
//! `catalog-server`, `opm serve`, a catalog source's pod) one of operator-registry's
//! `api.Registry` RPCs, without grpcurl or a generated client.
//!
//! The RPCs and their request fields are operator-registry's `pkg/api/registry.proto`
//! (`Registry` service, as `opm serve` implements it in `pkg/server/server.go`); the arguments
//! are flags named after the request fields. `--output json` prints each answer message in the
//! protobuf JSON mapping, as `grpcurl -plaintext ADDR api.Registry/METHOD` does (one indented
//! object per message, streams message after message). The client is
//! `olmkit_catalog_server::client`.

use crate::exit::{CmdError, ResultExt};
use crate::output::{GlobalArgs, OutputFormat, print_data};
use olmkit_catalog_server::client::{ClientError, Gvk, Message, Query, RegistryClient, to_json};
use olmkit_catalog_server::pb;
use std::time::Duration;

/// The RPCs `catalog query` runs (the `api.Registry` methods, plus the health check).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "PascalCase")]
pub enum Method {
    /// Every package name (stream).
    ListPackages,
    /// A package, its channels and their heads (--name).
    GetPackage,
    /// A bundle (--package --channel --csv-name).
    GetBundle,
    /// The head of a channel (--package --channel; deprecated upstream).
    GetBundleForChannel,
    /// Entries that replace, skip or skipRange a CSV (--csv-name; stream).
    GetChannelEntriesThatReplace,
    /// The bundle of a channel that replaces a CSV (--csv-name --package --channel).
    GetBundleThatReplaces,
    /// Entries whose bundle provides an API (--group --version --kind; stream).
    GetChannelEntriesThatProvide,
    /// Channel heads that provide an API (--group --version --kind; stream).
    GetLatestChannelEntriesThatProvide,
    /// The default channel's head that provides an API (--group --version --kind).
    GetDefaultBundleThatProvides,
    /// Every bundle, once per channel (stream).
    ListBundles,
    /// grpc.health.v1 Health/Check of the server (exit 1 unless SERVING).
    Health,
}

/// Arguments of `catalog query`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The RPC.
    #[arg(value_enum, ignore_case = true, value_name = "METHOD")]
    pub method: Method,
    /// The server, HOST:PORT (opm serve's and catalog-server's default port is 50051).
    #[arg(
        long,
        short = 'a',
        default_value = "localhost:50051",
        value_name = "HOST:PORT"
    )]
    pub address: String,
    /// GetPackage: the package name.
    #[arg(long)]
    pub name: Option<String>,
    /// The package (pkgName).
    #[arg(long)]
    pub package: Option<String>,
    /// The channel (channelName).
    #[arg(long)]
    pub channel: Option<String>,
    /// The bundle's CSV name (csvName).
    #[arg(long)]
    pub csv_name: Option<String>,
    /// API group (provider queries).
    #[arg(long)]
    pub group: Option<String>,
    /// API version (provider queries).
    #[arg(long)]
    pub version: Option<String>,
    /// API kind (provider queries).
    #[arg(long)]
    pub kind: Option<String>,
    /// API plural (provider queries; optional).
    #[arg(long)]
    pub plural: Option<String>,
    /// Time allowed to connect, and for each answer message.
    #[arg(long, default_value_t = 10, value_name = "SECONDS")]
    pub timeout: u64,
    /// Output format: text, or each message in the protobuf JSON mapping (as grpcurl).
    #[arg(long, short = 'o', value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
}

fn need(value: &Option<String>, flag: &str, method: Method) -> Result<String, CmdError> {
    value.clone().ok_or_else(|| {
        CmdError::msg(format!("{method:?} needs --{flag}")).hint(usage(method).to_string())
    })
}

/// The flags each RPC takes, for hints.
fn usage(method: Method) -> &'static str {
    match method {
        Method::GetPackage => "bundle-tool catalog query GetPackage --name PACKAGE",
        Method::GetBundle => {
            "bundle-tool catalog query GetBundle --package PACKAGE --channel CHANNEL --csv-name CSV"
        }
        Method::GetBundleForChannel => {
            "bundle-tool catalog query GetBundleForChannel --package PACKAGE --channel CHANNEL"
        }
        Method::GetChannelEntriesThatReplace => {
            "bundle-tool catalog query GetChannelEntriesThatReplace --csv-name CSV"
        }
        Method::GetBundleThatReplaces => {
            "bundle-tool catalog query GetBundleThatReplaces --csv-name CSV --package PACKAGE --channel CHANNEL"
        }
        Method::GetChannelEntriesThatProvide
        | Method::GetLatestChannelEntriesThatProvide
        | Method::GetDefaultBundleThatProvides => {
            "pass the API as --group GROUP --version VERSION --kind KIND"
        }
        Method::ListPackages | Method::ListBundles | Method::Health => "",
    }
}

/// The query the flags describe.
pub fn query_of(a: &Args) -> Result<Query, CmdError> {
    let m = a.method;
    let gvk = || -> Result<Gvk, CmdError> {
        Ok(Gvk {
            group: need(&a.group, "group", m)?,
            version: need(&a.version, "version", m)?,
            kind: need(&a.kind, "kind", m)?,
            plural: a.plural.clone().unwrap_or_default(),
        })
    };
    Ok(match m {
        Method::ListPackages => Query::ListPackages,
        Method::GetPackage => Query::GetPackage {
            name: a
                .name
                .clone()
                .or_else(|| a.package.clone())
                .ok_or_else(|| {
                    CmdError::msg("GetPackage needs --name").hint(usage(m).to_string())
                })?,
        },
        Method::GetBundle => Query::GetBundle {
            package: need(&a.package, "package", m)?,
            channel: need(&a.channel, "channel", m)?,
            csv_name: need(&a.csv_name, "csv-name", m)?,
        },
        Method::GetBundleForChannel => Query::GetBundleForChannel {
            package: need(&a.package, "package", m)?,
            channel: need(&a.channel, "channel", m)?,
        },
        Method::GetChannelEntriesThatReplace => Query::GetChannelEntriesThatReplace {
            csv_name: need(&a.csv_name, "csv-name", m)?,
        },
        Method::GetBundleThatReplaces => Query::GetBundleThatReplaces {
            csv_name: need(&a.csv_name, "csv-name", m)?,
            package: need(&a.package, "package", m)?,
            channel: need(&a.channel, "channel", m)?,
        },
        Method::GetChannelEntriesThatProvide => Query::GetChannelEntriesThatProvide(gvk()?),
        Method::GetLatestChannelEntriesThatProvide => {
            Query::GetLatestChannelEntriesThatProvide(gvk()?)
        }
        Method::GetDefaultBundleThatProvides => Query::GetDefaultBundleThatProvides(gvk()?),
        Method::ListBundles => Query::ListBundles,
        Method::Health => Query::Health,
    })
}

fn apis(list: &[pb::GroupVersionKind]) -> String {
    list.iter()
        .map(|g| {
            if g.group.is_empty() {
                format!("{}.{}", g.kind, g.version)
            } else {
                format!("{}.{}.{}", g.kind, g.version, g.group)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn deprecated(d: Option<&pb::Deprecation>) -> String {
    match d {
        Some(d) => format!(" (deprecated: {})", d.message),
        None => String::new(),
    }
}

/// One message as text.
pub fn to_text(msg: &Message) -> String {
    let mut out = String::new();
    let mut field = |k: &str, v: &str| {
        if !v.is_empty() {
            out.push_str(&format!("  {k:<13}{v}\n"));
        }
    };
    match msg {
        Message::PackageName(p) => return format!("{}\n", p.name),
        Message::Health(s) => return format!("{s}\n"),
        Message::ChannelEntry(e) => {
            let replaces = if e.replaces.is_empty() {
                String::new()
            } else {
                format!(" replaces {}", e.replaces)
            };
            return format!(
                "{} (package {}, channel {}){replaces}\n",
                e.bundle_name, e.package_name, e.channel_name
            );
        }
        Message::Package(p) => {
            let mut s = format!("package {}{}\n", p.name, deprecated(p.deprecation.as_ref()));
            s.push_str(&format!("  default channel: {}\n", p.default_channel_name));
            let width = p.channels.iter().map(|c| c.name.len()).max().unwrap_or(0);
            for c in &p.channels {
                s.push_str(&format!(
                    "  channel {:<width$}  head {}{}\n",
                    c.name,
                    c.csv_name,
                    deprecated(c.deprecation.as_ref())
                ));
            }
            return s;
        }
        Message::Bundle(b) => {
            let header = format!(
                "bundle {}{}\n",
                b.csv_name,
                deprecated(b.deprecation.as_ref())
            );
            field("package:", &b.package_name);
            field("channel:", &b.channel_name);
            field("version:", &b.version);
            field("image:", &b.bundle_path);
            field("replaces:", &b.replaces);
            field("skips:", &b.skips.join(", "));
            field("skipRange:", &b.skip_range);
            field("provides:", &apis(&b.provided_apis));
            field("requires:", &apis(&b.required_apis));
            for d in &b.dependencies {
                field("dependency:", &format!("{} {}", d.r#type, d.value));
            }
            for p in &b.properties {
                let mut v = p.value.clone();
                if v.len() > 100 {
                    v.truncate(v.floor_char_boundary(100));
                    v.push_str("...");
                }
                field("property:", &format!("{} {v}", p.r#type));
            }
            field(
                "csvJson:",
                &if b.csv_json.is_empty() {
                    String::new()
                } else {
                    format!("{} bytes", b.csv_json.len())
                },
            );
            field(
                "objects:",
                &if b.object.is_empty() {
                    String::new()
                } else {
                    format!("{} (--output json prints them)", b.object.len())
                },
            );
            out.insert_str(0, &header);
        }
    }
    out
}

fn client_err(e: ClientError, address: &str) -> CmdError {
    let hint = match &e {
        ClientError::Connect { .. } | ClientError::Address { .. } => format!(
            "is a catalog server listening on {address}? `bundle-tool serve catalog --port PORT` starts one; pass --address HOST:PORT"
        ),
        ClientError::Status {
            code: tonic_code, ..
        } if *tonic_code == olmkit_catalog_server::tonic::Code::NotFound => {
            "`bundle-tool catalog query ListPackages` and `GetPackage --name P` list what the server has".to_string()
        }
        ClientError::Status { .. } => {
            "the server refused the call; `bundle-tool catalog query Health` says whether it is serving".to_string()
        }
        ClientError::Timeout { .. } => {
            "pass --timeout SECONDS for a slow server or a large answer".to_string()
        }
    };
    CmdError::user(e).hint(hint)
}

/// Runs `catalog query`.
pub async fn run(a: Args, _g: &GlobalArgs) -> Result<(), CmdError> {
    let query = query_of(&a)?;
    let timeout = Duration::from_secs(a.timeout.max(1));
    let mut client = RegistryClient::connect(&a.address, timeout)
        .await
        .map_err(|e| client_err(e, &a.address))?;
    let mut not_serving = None;
    let format = a.output;
    let printed = client
        .query(&query, |m| {
            if let Message::Health(s) = &m
                && s != "SERVING"
            {
                not_serving = Some(s.clone());
            }
            let text = match format {
                OutputFormat::Json => to_json(&m),
                OutputFormat::Text => to_text(&m),
            };
            print_data(&text)
        })
        .await
        .map_err(|e| client_err(e, &a.address))?
        .unexpected_err()?;
    tracing::debug!(printed, method = query.method(), "query answered");
    match not_serving {
        Some(s) => Err(CmdError::msg(format!("{} is {s}", a.address))
            .hint("the server is loading its catalog or overloaded; retry, or read its log")),
        None => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    #[command(disable_version_flag = true)]
    struct T {
        #[command(flatten)]
        a: Args,
    }

    fn parse(args: &[&str]) -> Args {
        T::try_parse_from(std::iter::once("q").chain(args.iter().copied()))
            .unwrap()
            .a
    }

    #[test]
    fn flags_become_the_request() {
        let q = query_of(&parse(&[
            "getbundle",
            "--package",
            "p",
            "--channel",
            "c",
            "--csv-name",
            "p.v1",
        ]))
        .unwrap();
        assert_eq!(
            q,
            Query::GetBundle {
                package: "p".into(),
                channel: "c".into(),
                csv_name: "p.v1".into()
            }
        );
        let q = query_of(&parse(&[
            "GetDefaultBundleThatProvides",
            "--group",
            "cache.example.com",
            "--version",
            "v1",
            "--kind",
            "Memcached",
        ]))
        .unwrap();
        assert_eq!(q.method(), "GetDefaultBundleThatProvides");
        let e = query_of(&parse(&["GetBundleThatReplaces", "--csv-name", "x"]));
        assert!(e.is_err());
        // GetPackage takes --package too.
        assert_eq!(
            query_of(&parse(&["GetPackage", "--package", "p"])).unwrap(),
            Query::GetPackage { name: "p".into() }
        );
    }

    #[test]
    fn text_of_a_package() {
        let p = pb::Package {
            name: "p".into(),
            channels: vec![
                pb::Channel {
                    name: "alpha".into(),
                    csv_name: "p.v2".into(),
                    deprecation: None,
                },
                pb::Channel {
                    name: "stable".into(),
                    csv_name: "p.v1".into(),
                    deprecation: Some(pb::Deprecation {
                        message: "use alpha".into(),
                    }),
                },
            ],
            default_channel_name: "stable".into(),
            deprecation: None,
        };
        assert_eq!(
            to_text(&Message::Package(p)),
            "package p\n  default channel: stable\n  channel alpha   head p.v2\n  channel stable  head p.v1 (deprecated: use alpha)\n"
        );
    }
}
