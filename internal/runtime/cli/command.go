// Package cli is the `quantykube runtime` command: the CRI server, and the hidden
// `monitor` subcommand the server re-executes for every container.
package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"

	"github.com/quantyroot/quantykube/internal/runtime/config"
	"github.com/quantyroot/quantykube/internal/runtime/images"
	"github.com/quantyroot/quantykube/internal/runtime/monitor"
	"github.com/quantyroot/quantykube/internal/runtime/server"
)

// NewCommand returns the `runtime` command.
func NewCommand() *cobra.Command {
	var cfgPath, socket, stateDir, rootDir, logLevel string
	cmd := &cobra.Command{
		Use:   "runtime",
		Short: "Run the CRI container runtime (kubelet's containerRuntimeEndpoint)",
		Long: `Serve the CRI v1 API on a unix socket and run containers with runc.
Configuration: ` + config.DefaultPath + ` (TOML; see docs/adr/101-runtime-design.md).
Flags override the file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			if socket != "" {
				cfg.Socket = socket
			}
			if stateDir != "" {
				cfg.StateDir = stateDir
			}
			if rootDir != "" {
				cfg.RootDir = rootDir
			}
			if logLevel != "" {
				cfg.LogLevel = logLevel
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return serve(ctx, cfg, monitorPath(cmd))
		},
	}
	cmd.PersistentFlags().StringVar(&cfgPath, "config", config.DefaultPath, "configuration file (TOML)")
	cmd.Flags().StringVar(&socket, "socket", "", "CRI unix socket (default from config: /run/quantykube/runtime.sock)")
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "state directory (default from config: /run/quantykube/runtime)")
	cmd.PersistentFlags().StringVar(&rootDir, "root-dir", "", "image and writable-layer directory (default from config: /var/lib/quantykube/runtime)")
	cmd.Flags().StringVar(&logLevel, "log-level", "", "debug, info, warn or error")
	cmd.AddCommand(newMonitorCommand(), newImportCommand(&cfgPath, &rootDir))
	return cmd
}

// newImportCommand loads docker-archive tarballs into the image store (nodes without a
// registry). It may run while the runtime serves: the store's index is shared safely.
func newImportCommand(cfgPath, rootDir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE.tar...",
		Short: "Load docker-archive image tarballs into the runtime's image store",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			cfg, err := config.Load(*cfgPath)
			if err != nil {
				return err
			}
			if *rootDir != "" {
				cfg.RootDir = *rootDir
			}
			st, err := images.Open(filepath.Join(cfg.RootDir, "images"), config.Registry{}) // imports pull nothing
			if err != nil {
				return err
			}
			for _, f := range files {
				ims, err := st.Import(f)
				if err != nil {
					return err
				}
				for _, im := range ims {
					fmt.Fprintf(cmd.OutOrStdout(), "imported %s %s\n", strings.Join(im.RepoTags, ","), im.ID)
				}
			}
			return nil
		},
	}
}

// monitorPath is the argv (after the executable) that reaches the monitor subcommand.
func monitorPath(cmd *cobra.Command) []string {
	var names []string
	for c := cmd; c != nil && c.HasParent(); c = c.Parent() {
		names = append([]string{c.Name()}, names...)
	}
	return append(names, "monitor")
}

func newMonitorCommand() *cobra.Command {
	var o monitor.Options
	cmd := &cobra.Command{
		Use:    "monitor",
		Short:  "Watch one container (started by the runtime, not by hand)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.ID == "" || o.Bundle == "" || o.Dir == "" {
				return fmt.Errorf("monitor needs --id, --bundle and --dir: it is started by `quantykube runtime`, not by hand")
			}
			return monitor.Run(o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ID, "id", "", "container id")
	f.StringVar(&o.Bundle, "bundle", "", "OCI bundle")
	f.StringVar(&o.Dir, "dir", "", "container state directory")
	f.StringVar(&o.LogPath, "log-path", "", "CRI log file")
	f.StringVar(&o.Runc, "runc", "runc", "runc binary")
	f.StringVar(&o.RuncRoot, "runc-root", "", "runc --root")
	f.StringVar(&o.CgroupMemoryDir, "cgroup-memory-dir", "", "memory cgroup directory (OOM detection)")
	f.BoolVar(&o.Terminal, "terminal", false, "allocate a terminal")
	f.BoolVar(&o.Stdin, "stdin", false, "keep stdin open")
	f.BoolVar(&o.StdinOnce, "stdin-once", false, "close stdin after the first attach ends")
	return cmd
}

func setupLogging(level string) {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l})))
}

// orphanScanInterval is how often zombie orphans are looked for (server.ReapOrphans).
const orphanScanInterval = 30 * time.Second

func serve(ctx context.Context, cfg config.Config, monArgs []string) error {
	setupLogging(cfg.LogLevel)
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own executable: %w", err)
	}
	if p, err := exec.LookPath(cfg.RuncPath); err == nil {
		cfg.RuncPath, _ = filepath.Abs(p)
	} else {
		return fmt.Errorf("runc %q not found: install runc or set runc_path in %s", cfg.RuncPath, config.DefaultPath)
	}
	// Processes of `runc exec --detach` (terminal execs) are reparented to us and reaped by
	// the exec that started them.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	svc, err := server.New(cfg, server.Options{Exe: exe, MonitorArgs: monArgs})
	if err != nil {
		return err
	}
	reapCtx, stopReaper := context.WithCancel(context.Background())
	defer stopReaper()
	go server.ReapOrphans(reapCtx, orphanScanInterval)
	addr, err := freeAddr(cfg.StreamAddress)
	if err != nil {
		return err
	}
	scfg := streaming.DefaultConfig
	scfg.Addr = addr
	st, err := streaming.NewServer(scfg, svc.StreamRuntime())
	if err != nil {
		return fmt.Errorf("streaming server: %w", err)
	}
	svc.SetStreaming(st)
	go func() {
		if err := st.Start(true); err != nil {
			slog.Error("streaming server stopped", "err", err)
		}
	}()

	if err := os.MkdirAll(filepath.Dir(cfg.Socket), 0o755); err != nil {
		return fmt.Errorf("create socket dir: %w", err)
	}
	_ = os.Remove(cfg.Socket)
	l, err := net.Listen("unix", cfg.Socket)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Socket, err)
	}
	g := grpc.NewServer(grpc.MaxRecvMsgSize(16<<20), grpc.MaxSendMsgSize(16<<20))
	runtimeapi.RegisterRuntimeServiceServer(g, svc)
	runtimeapi.RegisterImageServiceServer(g, svc)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case s := <-sig:
			slog.Info("stopping (containers keep running)", "signal", s.String())
		case <-ctx.Done():
			slog.Info("stopping (containers keep running)", "reason", context.Cause(ctx))
		}
		g.Stop()
		st.Stop()
	}()
	slog.Info("quantykube runtime serving", "socket", cfg.Socket, "streaming", addr, "state", cfg.StateDir)
	if err := g.Serve(l); err != nil {
		return fmt.Errorf("serve CRI: %w", err)
	}
	return nil
}

// freeAddr resolves a ":0" port to a concrete free one (the streaming server needs the
// final address to build its URLs).
func freeAddr(addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("streaming address %s: %w", addr, err)
	}
	a := l.Addr().String()
	l.Close()
	return a, nil
}
