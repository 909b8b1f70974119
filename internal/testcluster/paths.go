package testcluster

import (
	"bytes"
	_ "embed"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func resolveBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("RUDDER_BIN_DIR")
	}
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin")
	}
	return filepath.Abs(dir)
}

// RepoRoot finds the directory of rudder's go.mod above the working directory.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil &&
			bytes.HasPrefix(b, []byte("module github.com/rudder-operator/rudder\n")) {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no rudder go.mod above %s", wd)
		}
	}
}

// FreeAddr is a loopback TCP address whose port is free right now (for a process to listen
// on next).
func FreeAddr() (*net.TCPAddr, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr), nil
}

// ShortMode reports whether the tests run under `go test -short`, where no control plane
// starts: a package's integration tests skip themselves then (crtest.NeedsCluster), and its
// unit tests run, whatever -run selects.
func ShortMode() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	return testing.Short()
}
