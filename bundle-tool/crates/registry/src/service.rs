//! The tonic services: `api.Registry` and `api.ExperimentalRegistry` over a catalog that may
//! still be loading.
//!
//! The server accepts connections before the catalog is loaded (so probes get an answer at
//! once); until then, and forever if loading failed, every RPC answers `UNAVAILABLE` with the
//! reason, and the health service says `NOT_SERVING`. Queries that may touch the disk run on
//! the blocking pool; `ListBundles` streams through a small bounded channel, so a slow client
//! holds back the reader instead of making the server buffer the catalog.

use crate::catalog::Catalog;
use crate::pb::{
    self, experimental_registry_server::ExperimentalRegistry, registry_server::Registry,
};
use crate::query::{self, QueryError};
use futures::Stream;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// Header a client must send (with value `true`) to use the experimental service.
pub const ACKNOWLEDGE_EXPERIMENTAL: &str = "x-acknowledge-experimental";

/// Bundles buffered between the disk reader and the network in `ListBundles`.
const STREAM_BUFFER: usize = 16;

#[derive(Debug, Default)]
enum SlotState {
    #[default]
    Loading,
    Ready(Arc<Catalog>),
    Failed(String),
}

/// The catalog being served, shared between the loader and the services.
#[derive(Clone, Debug, Default)]
pub struct CatalogSlot(Arc<RwLock<SlotState>>);

impl CatalogSlot {
    /// An empty slot (still loading).
    pub fn new() -> Self {
        Self::default()
    }

    /// Publishes a loaded catalog.
    pub fn set_ready(&self, catalog: Arc<Catalog>) {
        if let Ok(mut s) = self.0.write() {
            *s = SlotState::Ready(catalog);
        }
    }

    /// Records why loading failed.
    pub fn set_failed(&self, reason: String) {
        if let Ok(mut s) = self.0.write() {
            *s = SlotState::Failed(reason);
        }
    }

    /// The catalog, or `UNAVAILABLE` with the reason there is none.
    pub fn get(&self) -> Result<Arc<Catalog>, Status> {
        let state = self
            .0
            .read()
            .map_err(|_| Status::internal("catalog state is poisoned"))?;
        match &*state {
            SlotState::Ready(c) => Ok(c.clone()),
            SlotState::Loading => Err(Status::unavailable("the catalog is still loading")),
            SlotState::Failed(why) => Err(Status::unavailable(format!(
                "the catalog could not be loaded: {why}"
            ))),
        }
    }
}

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

async fn blocking<T, F>(f: F) -> Result<Response<T>, Status>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, QueryError> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Status::internal(format!("query task failed: {e}")))?
        .map(Response::new)
        .map_err(Status::from)
}

fn ready_stream<T: Send + 'static>(items: Vec<T>) -> BoxStream<T> {
    Box::pin(tokio_stream::iter(items.into_iter().map(Ok)))
}

async fn list_stream<T, F>(f: F) -> Result<Response<BoxStream<T>>, Status>
where
    T: Send + 'static,
    F: FnOnce() -> Result<Vec<T>, QueryError> + Send + 'static,
{
    let items = blocking(f).await?.into_inner();
    Ok(Response::new(ready_stream(items)))
}

/// `api.Registry`.
#[derive(Clone, Debug)]
pub struct RegistryService {
    slot: CatalogSlot,
}

impl RegistryService {
    /// A service answering from `slot`.
    pub fn new(slot: CatalogSlot) -> Self {
        Self { slot }
    }
}

#[tonic::async_trait]
impl Registry for RegistryService {
    type ListPackagesStream = BoxStream<pb::PackageName>;
    type GetChannelEntriesThatReplaceStream = BoxStream<pb::ChannelEntry>;
    type GetChannelEntriesThatProvideStream = BoxStream<pb::ChannelEntry>;
    type GetLatestChannelEntriesThatProvideStream = BoxStream<pb::ChannelEntry>;
    type ListBundlesStream = BoxStream<pb::Bundle>;

    async fn list_packages(
        &self,
        _request: Request<pb::ListPackageRequest>,
    ) -> Result<Response<Self::ListPackagesStream>, Status> {
        let cat = self.slot.get()?;
        Ok(Response::new(ready_stream(query::list_packages(&cat))))
    }

    async fn get_package(
        &self,
        request: Request<pb::GetPackageRequest>,
    ) -> Result<Response<pb::Package>, Status> {
        let cat = self.slot.get()?;
        let r = request.into_inner();
        query::get_package(&cat, &r.name)
            .map(Response::new)
            .map_err(Status::from)
    }

    async fn get_bundle(
        &self,
        request: Request<pb::GetBundleRequest>,
    ) -> Result<Response<pb::Bundle>, Status> {
        let cat = self.slot.get()?;
        let r = request.into_inner();
        blocking(move || query::get_bundle(&cat, &r.pkg_name, &r.channel_name, &r.csv_name)).await
    }

    async fn get_bundle_for_channel(
        &self,
        request: Request<pb::GetBundleInChannelRequest>,
    ) -> Result<Response<pb::Bundle>, Status> {
        let cat = self.slot.get()?;
        let r = request.into_inner();
        blocking(move || query::get_bundle_for_channel(&cat, &r.pkg_name, &r.channel_name)).await
    }

    async fn get_channel_entries_that_replace(
        &self,
        request: Request<pb::GetAllReplacementsRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatReplaceStream>, Status> {
        let cat = self.slot.get()?;
        let r = request.into_inner();
        list_stream(move || query::channel_entries_that_replace(&cat, &r.csv_name)).await
    }

    async fn get_bundle_that_replaces(
        &self,
        request: Request<pb::GetReplacementRequest>,
    ) -> Result<Response<pb::Bundle>, Status> {
        let cat = self.slot.get()?;
        let r = request.into_inner();
        blocking(move || {
            query::bundle_that_replaces(&cat, &r.csv_name, &r.pkg_name, &r.channel_name)
        })
        .await
    }

    async fn get_channel_entries_that_provide(
        &self,
        request: Request<pb::GetAllProvidersRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatProvideStream>, Status> {
        let cat = self.slot.get()?;
        let r = request.into_inner();
        list_stream(move || {
            query::channel_entries_that_provide(&cat, &r.group, &r.version, &r.kind)
        })
        .await
    }

    async fn get_latest_channel_entries_that_provide(
        &self,
        request: Request<pb::GetLatestProvidersRequest>,
    ) -> Result<Response<Self::GetLatestChannelEntriesThatProvideStream>, Status> {
        let cat = self.slot.get()?;
        let r = request.into_inner();
        list_stream(move || {
            query::latest_channel_entries_that_provide(&cat, &r.group, &r.version, &r.kind)
        })
        .await
    }

    async fn get_default_bundle_that_provides(
        &self,
        request: Request<pb::GetDefaultProviderRequest>,
    ) -> Result<Response<pb::Bundle>, Status> {
        let cat = self.slot.get()?;
        let r = request.into_inner();
        blocking(move || query::default_bundle_that_provides(&cat, &r.group, &r.version, &r.kind))
            .await
    }

    async fn list_bundles(
        &self,
        _request: Request<pb::ListBundlesRequest>,
    ) -> Result<Response<Self::ListBundlesStream>, Status> {
        let cat = self.slot.get()?;
        let (tx, rx) = tokio::sync::mpsc::channel(STREAM_BUFFER);
        tokio::task::spawn_blocking(move || {
            for b in query::list_bundles(&cat) {
                // A closed channel means the client went away: stop reading.
                if tx.blocking_send(b.map_err(Status::from)).is_err() {
                    break;
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// `api.ExperimentalRegistry`.
#[derive(Clone, Debug)]
pub struct ExperimentalService {
    slot: CatalogSlot,
}

impl ExperimentalService {
    /// A service answering from `slot`.
    pub fn new(slot: CatalogSlot) -> Self {
        Self { slot }
    }
}

#[tonic::async_trait]
impl ExperimentalRegistry for ExperimentalService {
    type ExperimentalListPackageCustomSchemasStream = BoxStream<prost_types::Struct>;

    async fn experimental_list_package_custom_schemas(
        &self,
        request: Request<pb::ExperimentalListPackageCustomSchemasRequest>,
    ) -> Result<Response<Self::ExperimentalListPackageCustomSchemasStream>, Status> {
        // Like opm: without the acknowledgement header the stream is silently empty, so
        // unaware clients see no change.
        let acknowledged = request
            .metadata()
            .get(ACKNOWLEDGE_EXPERIMENTAL)
            .and_then(|v| v.to_str().ok())
            == Some("true");
        if !acknowledged {
            return Ok(Response::new(ready_stream(Vec::new())));
        }
        let cat = self.slot.get()?;
        let r = request.into_inner();
        let (tx, rx) = tokio::sync::mpsc::channel(STREAM_BUFFER);
        tokio::task::spawn_blocking(move || {
            match query::custom_blobs(&cat, &r.schema, &r.package_name) {
                Err(e) => {
                    let _ = tx.blocking_send(Err(Status::from(e)));
                }
                Ok(iter) => {
                    for item in iter {
                        if tx.blocking_send(item.map_err(Status::from)).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
