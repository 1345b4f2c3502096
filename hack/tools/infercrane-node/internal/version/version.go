// Package version holds the version that build.sh stamps into every infercrane-node binary
// (-X …/internal/version.Version=…), so an image's tag can be read back from its binaries.
package version

// Version is "dev" in a plain `go build`; build.sh stamps the family's pinned version.
var Version = "dev"
