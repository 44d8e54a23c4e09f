// Command mkimage builds a single-layer OCI image from local files, offline,
// and writes it as a docker-archive tarball or an OCI archive (-format oci),
// both of which `ctr images import` accepts.
//
// It exists because this project's test clusters have no image registry and no
// Docker engine: every image a node runs (kube-apiserver, etcd, pause, a
// busybox workload, quantykube) is made from binaries built on this machine.
//
// Usage:
//
//	go run ./scripts/mkimage -out X.tar -tag registry.k8s.io/pause:3.10.2 \
//	    -add /path/pause:/pause -entrypoint /pause
//
// SOURCE_DATE_EPOCH (seconds since 1970, as reproducible-builds.org defines
// it), when set, is the image's created time and the date of every tar entry;
// unset, entries are dated at epoch and the config has no created time.
// -digest-file (with -format oci) writes the image's manifest digest, what a
// reference pinned by digest names (scripts/release.sh).
//
// Invariants: the image has exactly one layer holding the -add files, the
// -link symlinks, a minimal /etc/passwd and /etc/group (root and nobody) and a
// world-writable /tmp; its config names linux/amd64 (the host's platform) so
// containerd unpacks it; the archive is written beside -out and renamed into
// place, so a crash never leaves a half-written archive under -out.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var spec imageSpec
	var adds, links, tags, envs listFlag
	var entrypoint, cmd string
	flag.StringVar(&spec.out, "out", "", "docker-archive tarball to write (required)")
	flag.Var(&tags, "tag", "image reference to tag the image with (repeatable, at least one)")
	flag.Var(&adds, "add", "SRC:DST copy host file SRC to DST in the image (repeatable)")
	flag.Var(&links, "link", "DST:TARGET make DST a symlink to TARGET (repeatable)")
	flag.Var(&envs, "env", "K=V environment variable of the image (repeatable; PATH has a default)")
	flag.StringVar(&entrypoint, "entrypoint", "", "comma-separated entrypoint, e.g. /usr/local/bin/etcd")
	flag.StringVar(&cmd, "cmd", "", "comma-separated default arguments")
	flag.StringVar(&spec.workdir, "workdir", "/", "working directory of the image")
	flag.StringVar(&spec.format, "format", "docker", "archive format: docker (docker-archive) or oci (OCI image layout as a tar)")
	flag.StringVar(&spec.digestFile, "digest-file", "", "with -format oci: write the image's manifest digest (sha256:...) to this file")
	flag.Parse()

	if spec.out == "" || len(tags) == 0 {
		fmt.Fprintln(os.Stderr, "mkimage: -out and at least one -tag are required; run with -h for usage")
		os.Exit(2)
	}
	spec.tags = tags
	spec.envs = envs
	spec.entrypoint = splitList(entrypoint)
	spec.cmd = splitList(cmd)
	spec.arch = runtime.GOARCH
	var err error
	if spec.created, err = sourceDateEpoch(os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
		fail(err)
	}
	if spec.files, err = parsePairs(adds, "-add", "SRC:DST"); err != nil {
		fail(err)
	}
	if spec.links, err = parsePairs(links, "-link", "DST:TARGET"); err != nil {
		fail(err)
	}
	if err := build(spec); err != nil {
		fail(err)
	}
	slog.Info("image written", "out", spec.out, "tags", spec.tags)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
	os.Exit(1)
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// parsePairs splits each "A:B" value; both sides must be non-empty.
func parsePairs(values []string, flagName, form string) ([][2]string, error) {
	var out [][2]string
	for _, v := range values {
		a, b, ok := strings.Cut(v, ":")
		if !ok || a == "" || b == "" {
			return nil, fmt.Errorf("%s %q: want %s, e.g. %s /bin/x:/usr/local/bin/x", flagName, v, form, flagName)
		}
		out = append(out, [2]string{a, b})
	}
	return out, nil
}

// sourceDateEpoch parses SOURCE_DATE_EPOCH; "" gives the zero time (unset).
func sourceDateEpoch(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since 1970, e.g. $(git log -1 --format=%%ct)", v)
	}
	return time.Unix(n, 0).UTC(), nil
}
