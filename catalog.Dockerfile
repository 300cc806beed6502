# Catalog image for Docker or podman. `bundle-tool image build catalog` builds the same
# image without a container engine: same paths, label, entrypoint, arguments and user.
# distroless static:nonroot provides what bundle-tool's base layer does:
# /etc/passwd and /etc/group with nonroot (65532), /tmp and /home/nonroot.
FROM gcr.io/distroless/static:nonroot

# Static catalog server (hack/build-static.sh builds it).
COPY target/static/catalog-server /bin/catalog-server
# OLM probes catalog pods with `grpc_health_probe -addr=:50051`.
COPY target/static/catalog-server /bin/grpc_health_probe

# The declarative config root, where the label below says it is.
ADD catalog /configs
LABEL operators.operatorframework.io.index.configs.v1=/configs

USER 65532:65532
EXPOSE 50051
ENTRYPOINT ["/bin/catalog-server"]
CMD ["/configs","--port","50051"]
