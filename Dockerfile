# syntax=docker/dockerfile:1
# Build the manager binary.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY backends/ backends/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY revisions/ revisions/
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -buildvcs=false -ldflags="-s -w" -o /out/manager ./cmd/manager

# Run it on distroless, as a non-root user, with nothing else in the image.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
