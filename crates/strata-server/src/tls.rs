//! HTTPS, when the config names a certificate and a key (PEM): rustls (with ring) in front
//! of the same router. Connections are accepted here rather than by `axum::serve`, which
//! has no TLS; a failed handshake drops that connection only.

use crate::{ApiError, State};
use axum::extract::ConnectInfo;
use axum::Router;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::rustls;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

pub(crate) fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, ApiError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let fail = |what: &str, e: &dyn std::fmt::Display| ApiError::startup(format!("TLS {what}: {e}"));
    let certs = CertificateDer::pem_file_iter(cert)
        .map_err(|e| fail(&format!("certificate {}", cert.display()), &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| fail(&format!("certificate {}", cert.display()), &e))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| fail(&format!("key {}", key.display()), &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| fail("protocol versions", &e))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| fail("certificate and key", &e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Accepts TLS connections until `shutdown` resolves, then gives requests in flight 30 s.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    acceptor: TlsAcceptor,
    shutdown: impl std::future::Future<Output = ()>,
    state: State,
) -> std::io::Result<()> {
    tokio::pin!(shutdown);
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let Ok((tcp, peer)) = accepted else { continue };
                let _ = tcp.set_nodelay(true); // as for plain HTTP (lib.rs)
                let (app, acceptor, quiet) = (app.clone(), acceptor.clone(), state.config.quiet);
                tasks.spawn(async move {
                    let tls = match acceptor.accept(tcp).await {
                        Ok(t) => t,
                        Err(e) => {
                            if !quiet {
                                crate::log!("{} TLS handshake failed: {e}", peer.ip());
                            }
                            return;
                        }
                    };
                    let svc = app.map_request(move |req: hyper::Request<hyper::body::Incoming>| {
                        let mut req = req.map(axum::body::Body::new);
                        req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                        req
                    });
                    let svc = hyper_util::service::TowerToHyperService::new(svc);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), svc)
                        .await;
                });
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), async { while tasks.join_next().await.is_some() {} }).await;
    Ok(())
}
