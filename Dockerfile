# syntax=docker/dockerfile:1
# The manager image, for every platform a GPU cluster runs (amd64, and arm64 for Grace):
#
#   docker buildx build --platform linux/amd64,linux/arm64 -t <registry>/dgd-rollout:<tag> --push .
#
# The build stage runs on the builder's own platform and cross-compiles (no emulation):
# BuildKit sets TARGETOS and TARGETARCH per target platform. The context is the whole Go
# module less .dockerignore, so a package the manager starts importing is in the image
# without editing this file (test/install TestDockerfile builds exactly this layout).
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH} \
    go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/manager ./cmd/manager

# Run it on distroless, as a non-root user, with nothing else in the image. The one binary
# is the operator and its CRD installer (/manager apply-crds, the Helm chart's init
# container), which applies the CRDs embedded at build time.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
