//! Watch streaming: newline-delimited JSON events over a chunked response. A watch replays the
//! history after its resourceVersion (or the current state), then follows live changes; it
//! sends `ERROR` with a 410 `Expired` Status when the resourceVersion is too old, BOOKMARK
//! events when asked, the initial-events-end bookmark for `sendInitialEvents`, turns MODIFIED
//! into ADDED/DELETED when an object starts/stops matching the selectors, and ends at
//! `timeoutSeconds`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

use super::resources::{Params, Target, Want, to_version};
use super::{App, add_warnings};
use crate::error::ApiError;
use crate::meta;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::store::{Store, WatchFrom};
use crate::table;
use crate::watch::{EventType, StoredEvent};

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

fn line(kind: &str, object: &Value) -> Bytes {
    let mut s = json!({"type": kind, "object": object}).to_string();
    s.push('\n');
    Bytes::from(s)
}

struct Stream {
    app_store: Arc<Store>,
    t: Target,
    labels: LabelSelector,
    fields: FieldSelector,
    want: Want,
    tx: mpsc::Sender<Result<Bytes, Infallible>>,
    last_rv: u64,
}

impl Stream {
    fn matches(&self, o: &Value) -> bool {
        (self.t.ns.is_empty() || meta::namespace(o) == self.t.ns)
            && self.labels.matches(o)
            && self.fields.matches(o)
    }

    fn render(&self, o: Value) -> Value {
        match self.want {
            Want::Json => o,
            Want::Partial => table::partial(&o),
            Want::Table(inc) => {
                table::table(&self.t.rt, &self.t.version, &[o], inc, self.last_rv, None)
            }
        }
    }

    /// Sends one stored event; false when the client is gone or conversion failed.
    async fn send(&mut self, app: &App, ev: &StoredEvent) -> bool {
        let now = self.matches(&ev.object);
        let before = ev.prev.as_ref().is_some_and(|p| self.matches(p));
        let kind = match ev.kind {
            EventType::Added if now => EventType::Added,
            EventType::Modified if now && before => EventType::Modified,
            EventType::Modified if now => EventType::Added,
            EventType::Modified if before => EventType::Deleted,
            EventType::Deleted if now => EventType::Deleted,
            _ => {
                self.last_rv = self.last_rv.max(ev.rv);
                return true;
            }
        };
        let obj = match to_version(app, &self.t, vec![(*ev.object).clone()]).await {
            Ok(mut v) => v.pop().unwrap_or(Value::Null),
            Err(e) => {
                let _ = self.tx.send(Ok(line("ERROR", &e.status_json()))).await;
                return false;
            }
        };
        self.last_rv = self.last_rv.max(ev.rv);
        let body = self.render(obj);
        self.tx.send(Ok(line(kind.as_str(), &body))).await.is_ok()
    }

    async fn bookmark(&mut self, annotations: Option<Value>) -> bool {
        let mut md = json!({"resourceVersion": self.last_rv.to_string()});
        if let Some(a) = annotations {
            md["annotations"] = a;
        }
        let obj = json!({"kind": self.t.rt.kind, "apiVersion": self.t.rt.api_version(&self.t.version), "metadata": md});
        self.tx.send(Ok(line("BOOKMARK", &obj))).await.is_ok()
    }
}

pub(super) async fn watch(
    app: &Arc<App>,
    t: Target,
    q: &Params,
    want: Want,
) -> Result<Response, ApiError> {
    let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or_default())
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?;
    let fields = FieldSelector::parse(
        q.get("fieldSelector").unwrap_or_default(),
        &t.rt.group,
        &t.rt.plural,
    )
    .map_err(ApiError::bad_request)?;
    let send_initial = q.get("sendInitialEvents") == Some("true");
    let bookmarks = q.get("allowWatchBookmarks") == Some("true");
    let from = match q.get("resourceVersion") {
        _ if send_initial => WatchFrom::Snapshot,
        None | Some("") | Some("0") => WatchFrom::Snapshot,
        Some(rv) => WatchFrom::After(
            rv.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?,
        ),
    };
    let timeout = match q.get("timeoutSeconds") {
        Some(s) if !s.is_empty() => Duration::from_secs(
            s.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {s:?}")))?,
        ),
        _ => DEFAULT_TIMEOUT,
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(256);
    let ns = (!t.ns.is_empty()).then_some(t.ns.clone());
    let warnings = t.warnings.clone();
    match app.store.watch(&t.rt.key(), ns.as_deref(), from) {
        Err(e) => {
            // As the real server: a 200 whose only event is the ERROR.
            let _ = tx.try_send(Ok(line("ERROR", &e.status_json())));
            drop(tx);
        }
        Ok(start) => {
            let mut stream = Stream {
                app_store: app.store.clone(),
                t,
                labels,
                fields,
                want,
                tx,
                last_rv: match from {
                    WatchFrom::After(rv) => rv,
                    WatchFrom::Snapshot => start.rv,
                },
            };
            let app = app.clone();
            let interval = app.bookmark_interval;
            tokio::spawn(async move {
                let mut rx_events = start.rx;
                let mut disconnect = start.disconnect;
                let deadline = tokio::time::sleep(timeout);
                tokio::pin!(deadline);
                for ev in &start.initial {
                    if !stream.send(&app, ev).await {
                        return;
                    }
                }
                if matches!(from, WatchFrom::Snapshot) {
                    stream.last_rv = stream.last_rv.max(start.rv);
                }
                if send_initial
                    && !stream
                        .bookmark(Some(json!({"k8s.io/initial-events-end": "true"})))
                        .await
                {
                    return;
                }
                let mut ticker = tokio::time::interval(interval);
                ticker.tick().await;
                loop {
                    tokio::select! {
                        ev = rx_events.recv() => match ev {
                            Ok(ev) => {
                                if !stream.send(&app, &ev).await {
                                    return;
                                }
                            }
                            // Too slow to keep up: end the stream; the client re-watches from its
                            // last resourceVersion, as with a real server's slow watchers.
                            Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => return,
                        },
                        _ = ticker.tick(), if bookmarks => {
                            let current = stream.app_store.read().rv();
                            // Everything up to `current` is already queued; deliver it first.
                            loop {
                                match rx_events.try_recv() {
                                    Ok(ev) => {
                                        if !stream.send(&app, &ev).await {
                                            return;
                                        }
                                    }
                                    Err(broadcast::error::TryRecvError::Empty) => break,
                                    Err(_) => return,
                                }
                            }
                            stream.last_rv = stream.last_rv.max(current);
                            if !stream.bookmark(None).await {
                                return;
                            }
                        }
                        _ = &mut deadline => return,
                        _ = disconnect.changed() => return,
                        _ = stream.tx.closed() => return,
                    }
                }
            });
        }
    }
    let mut resp = Response::new(Body::from_stream(ReceiverStream::new(rx)));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    add_warnings(resp.headers_mut(), &warnings);
    Ok(resp)
}
