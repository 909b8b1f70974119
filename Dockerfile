# Build: the same flags as `make build`.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /rudder .

# Run: distroless, non-root. charts/ and watches.yaml are baked in as defaults; mount a
# ConfigMap or PVC over /etc/rudder to replace them without rebuilding.
FROM gcr.io/distroless/static:nonroot
COPY --from=build /rudder /rudder
COPY --chown=65532:65532 watches.yaml /etc/rudder/watches.yaml
COPY --chown=65532:65532 charts/ /etc/rudder/charts/
USER 65532:65532
WORKDIR /etc/rudder
ENTRYPOINT ["/rudder", "--watches-file=/etc/rudder/watches.yaml"]
