//! The tonic services: `api.Registry` and `api.ExperimentalRegistry` over a catalog that may
//! still be loading.
//!
//! The server accepts connections before the catalog is loaded (so probes get an answer at
//! once); until then, and forever if loading failed, every RPC answers `UNAVAILABLE` with the
//! reason, and the health service says `NOT_SERVING`. Queries that may touch the disk run on
//! the blocking pool within the budgets of [`crate::limits`]: unary calls on their own workers,
//! streams on others. Every streaming response holds a stream slot while it is open, and
//! `ListBundles` (and the custom-schema stream) produce their items lazily, a small batch at a
//! time when the transport asks for more, so a client that does not read holds back only its
//! own stream and costs one batch, not a thread or the catalog.

use crate::catalog::Catalog;
use crate::limits::{Budgets, StreamPermit};
use crate::pb::{
    self, experimental_registry_server::ExperimentalRegistry, registry_server::Registry,
};
use crate::query::{self, QueryError};
use futures::{Stream, StreamExt};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use tonic::{Request, Response, Status};

/// Header a client must send (with value `true`) to use the experimental service.
pub const ACKNOWLEDGE_EXPERIMENTAL: &str = "x-acknowledge-experimental";

/// Items a stream produces per visit to a stream worker: enough to amortise the hand-off, few
/// enough that an unread stream holds little.
const STREAM_BATCH: usize = 8;

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

/// A streaming response together with its share of the stream budget, which is given back when
/// the response is dropped: finished, or reset by the client.
struct Budgeted<T> {
    inner: BoxStream<T>,
    _permit: StreamPermit,
}

impl<T> Stream for Budgeted<T> {
    type Item = Result<T, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

fn ready_stream<T: Send + 'static>(items: Vec<T>) -> BoxStream<T> {
    Box::pin(tokio_stream::iter(items.into_iter().map(Ok)))
}

/// Produces a stream of `total` items lazily, `STREAM_BATCH` at a time, each batch on a stream
/// worker: the next batch is read only when the transport asks for more, which HTTP/2 flow
/// control does only once the client has read the previous data. An unread stream therefore
/// holds one batch, no thread. The stream ends after the first error, as gRPC does.
fn lazy_stream<T, F>(budgets: Budgets, total: usize, produce: F) -> BoxStream<T>
where
    T: Send + 'static,
    F: Fn(usize, usize) -> Vec<Result<T, QueryError>> + Send + Sync + 'static,
{
    let produce = Arc::new(produce);
    let batches = futures::stream::unfold(Some(0usize), move |next| {
        let budgets = budgets.clone();
        let produce = produce.clone();
        async move {
            let start = next.filter(|&n| n < total)?;
            let batch = budgets
                .stream_work(move || produce(start, STREAM_BATCH))
                .await;
            let mut items = Vec::new();
            let mut failed = false;
            match batch {
                Ok(batch) => {
                    for item in batch {
                        match item {
                            Ok(v) => items.push(Ok(v)),
                            Err(e) => {
                                items.push(Err(Status::from(e)));
                                failed = true;
                                break;
                            }
                        }
                    }
                }
                Err(e) => {
                    items.push(Err(Status::from(e)));
                    failed = true;
                }
            }
            let following = (!failed).then_some(start + STREAM_BATCH);
            Some((futures::stream::iter(items), following))
        }
    });
    Box::pin(batches.flatten())
}

/// What both services share: the catalog and the budgets.
#[derive(Clone, Debug)]
struct Shared {
    slot: CatalogSlot,
    budgets: Budgets,
}

impl Shared {
    /// Runs a query that may read the disk on a unary worker.
    async fn unary<T, F>(&self, f: F) -> Result<Response<T>, Status>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T, QueryError> + Send + 'static,
    {
        self.budgets
            .unary(f)
            .await
            .map_err(Status::from)?
            .map(Response::new)
            .map_err(Status::from)
    }

    /// Takes a stream slot for a request's connection, or refuses the call.
    fn open<R>(&self, request: &Request<R>) -> Result<StreamPermit, Status> {
        self.budgets
            .open_stream(request.remote_addr())
            .map_err(Status::from)
    }

    /// A streaming answer computed at once on a unary worker (lists of metadata, bounded by the
    /// catalog's graph, not its payloads), holding a stream slot until it is read or dropped.
    async fn list<T, F>(&self, permit: StreamPermit, f: F) -> Result<Response<BoxStream<T>>, Status>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<Vec<T>, QueryError> + Send + 'static,
    {
        let items = self.unary(f).await?.into_inner();
        Ok(budgeted(ready_stream(items), permit))
    }
}

fn budgeted<T: Send + 'static>(
    inner: BoxStream<T>,
    permit: StreamPermit,
) -> Response<BoxStream<T>> {
    Response::new(Box::pin(Budgeted {
        inner,
        _permit: permit,
    }))
}

/// `api.Registry`.
#[derive(Clone, Debug)]
pub struct RegistryService {
    shared: Shared,
}

impl RegistryService {
    /// A service answering from `slot` within `budgets`.
    pub fn new(slot: CatalogSlot, budgets: Budgets) -> Self {
        Self {
            shared: Shared { slot, budgets },
        }
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
        request: Request<pb::ListPackageRequest>,
    ) -> Result<Response<Self::ListPackagesStream>, Status> {
        let cat = self.shared.slot.get()?;
        let permit = self.shared.open(&request)?;
        Ok(budgeted(ready_stream(query::list_packages(&cat)), permit))
    }

    async fn get_package(
        &self,
        request: Request<pb::GetPackageRequest>,
    ) -> Result<Response<pb::Package>, Status> {
        let cat = self.shared.slot.get()?;
        let r = request.into_inner();
        query::get_package(&cat, &r.name)
            .map(Response::new)
            .map_err(Status::from)
    }

    async fn get_bundle(
        &self,
        request: Request<pb::GetBundleRequest>,
    ) -> Result<Response<pb::Bundle>, Status> {
        let cat = self.shared.slot.get()?;
        let r = request.into_inner();
        self.shared
            .unary(move || query::get_bundle(&cat, &r.pkg_name, &r.channel_name, &r.csv_name))
            .await
    }

    async fn get_bundle_for_channel(
        &self,
        request: Request<pb::GetBundleInChannelRequest>,
    ) -> Result<Response<pb::Bundle>, Status> {
        let cat = self.shared.slot.get()?;
        let r = request.into_inner();
        self.shared
            .unary(move || query::get_bundle_for_channel(&cat, &r.pkg_name, &r.channel_name))
            .await
    }

    async fn get_channel_entries_that_replace(
        &self,
        request: Request<pb::GetAllReplacementsRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatReplaceStream>, Status> {
        let cat = self.shared.slot.get()?;
        let permit = self.shared.open(&request)?;
        let r = request.into_inner();
        self.shared
            .list(permit, move || {
                query::channel_entries_that_replace(&cat, &r.csv_name)
            })
            .await
    }

    async fn get_bundle_that_replaces(
        &self,
        request: Request<pb::GetReplacementRequest>,
    ) -> Result<Response<pb::Bundle>, Status> {
        let cat = self.shared.slot.get()?;
        let r = request.into_inner();
        self.shared
            .unary(move || {
                query::bundle_that_replaces(&cat, &r.csv_name, &r.pkg_name, &r.channel_name)
            })
            .await
    }

    async fn get_channel_entries_that_provide(
        &self,
        request: Request<pb::GetAllProvidersRequest>,
    ) -> Result<Response<Self::GetChannelEntriesThatProvideStream>, Status> {
        let cat = self.shared.slot.get()?;
        let permit = self.shared.open(&request)?;
        let r = request.into_inner();
        self.shared
            .list(permit, move || {
                query::channel_entries_that_provide(&cat, &r.group, &r.version, &r.kind)
            })
            .await
    }

    async fn get_latest_channel_entries_that_provide(
        &self,
        request: Request<pb::GetLatestProvidersRequest>,
    ) -> Result<Response<Self::GetLatestChannelEntriesThatProvideStream>, Status> {
        let cat = self.shared.slot.get()?;
        let permit = self.shared.open(&request)?;
        let r = request.into_inner();
        self.shared
            .list(permit, move || {
                query::latest_channel_entries_that_provide(&cat, &r.group, &r.version, &r.kind)
            })
            .await
    }

    async fn get_default_bundle_that_provides(
        &self,
        request: Request<pb::GetDefaultProviderRequest>,
    ) -> Result<Response<pb::Bundle>, Status> {
        let cat = self.shared.slot.get()?;
        let r = request.into_inner();
        self.shared
            .unary(move || query::default_bundle_that_provides(&cat, &r.group, &r.version, &r.kind))
            .await
    }

    async fn list_bundles(
        &self,
        request: Request<pb::ListBundlesRequest>,
    ) -> Result<Response<Self::ListBundlesStream>, Status> {
        let cat = self.shared.slot.get()?;
        let permit = self.shared.open(&request)?;
        let total = cat.list_len();
        let stream = lazy_stream(self.shared.budgets.clone(), total, move |start, n| {
            query::list_bundles_batch(&cat, start, n)
        });
        Ok(budgeted(stream, permit))
    }
}

/// `api.ExperimentalRegistry`.
#[derive(Clone, Debug)]
pub struct ExperimentalService {
    shared: Shared,
}

impl ExperimentalService {
    /// A service answering from `slot` within `budgets`.
    pub fn new(slot: CatalogSlot, budgets: Budgets) -> Self {
        Self {
            shared: Shared { slot, budgets },
        }
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
        let cat = self.shared.slot.get()?;
        let permit = self.shared.open(&request)?;
        let r = request.into_inner();
        let positions = {
            let cat = cat.clone();
            self.shared
                .unary(move || query::custom_blob_positions(&cat, &r.schema, &r.package_name))
                .await?
                .into_inner()
        };
        let total = positions.len();
        let stream = lazy_stream(self.shared.budgets.clone(), total, move |start, n| {
            positions
                .iter()
                .skip(start)
                .take(n)
                .map(|&i| query::custom_blob_at(&cat, i))
                .collect()
        });
        Ok(budgeted(stream, permit))
    }
}
