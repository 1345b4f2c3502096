package deviceplugin

// Keeping the plugin known to the kubelet: serve our socket, register on kubelet.sock, and do
// both again whenever the kubelet restarts. A restarting kubelet recreates kubelet.sock and
// removes every other socket in the directory, so the loop watches both files (polling: no
// inotify dependency, and a second's delay is nothing next to a kubelet restart).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const (
	kubeletSocketName = "kubelet.sock"
	registerTimeout   = 5 * time.Second
)

// Run serves and registers the plugin until ctx ends, then stops serving and removes its socket.
func Run(ctx context.Context, c Config, out io.Writer, poll time.Duration) {
	log := &lineLog{out: out}
	p := &plugin{
		config:  c,
		kubelet: filepath.Join(c.PluginDir, kubeletSocketName),
		socket:  filepath.Join(c.PluginDir, c.SocketName),
		log:     log,
		service: &service{inventory: NewInventory(c.Count), log: log},
	}
	product := c.Product
	if product == "" {
		product = "unnamed"
	}
	log.say("advertising %d fake %s GPU(s) as %s on %s", c.Count, product, c.ResourceName, p.socket)
	defer p.stop()
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	for {
		p.reconcile(ctx)
		select {
		case <-ctx.Done():
			log.say("stopping: removing %s", p.socket)
			return
		case <-ticker.C:
		}
	}
}

type plugin struct {
	config          Config
	kubelet, socket string
	log             *lineLog
	service         *service
	server          *grpc.Server
	registeredWith  os.FileInfo // the kubelet.sock we last registered with
	lastProblem     string
}

// reconcile does whatever one look at the two sockets says is missing.
func (p *plugin) reconcile(ctx context.Context) {
	kubelet, err := os.Stat(p.kubelet)
	if err != nil {
		p.problem("waiting for %s", p.kubelet)
		return
	}
	if _, err := os.Stat(p.socket); p.server == nil || err != nil {
		if err := p.serve(); err != nil {
			p.problem("cannot serve %s: %v", p.socket, err)
			return
		}
		p.registeredWith = nil
	}
	if p.registeredWith != nil && sameSocket(p.registeredWith, kubelet) {
		return
	}
	if err := p.register(ctx); err != nil {
		p.problem("cannot register with %s: %v", p.kubelet, err)
		return
	}
	p.registeredWith = kubelet
	p.lastProblem = ""
	p.log.say("registered %s with the kubelet (endpoint %s)", p.config.ResourceName, p.config.SocketName)
}

// problem logs a failure once, not every poll.
func (p *plugin) problem(format string, a ...any) {
	line := fmt.Sprintf(format, a...)
	if line != p.lastProblem {
		p.lastProblem = line
		p.log.say("%s", line)
	}
}

func (p *plugin) serve() error {
	if p.server != nil {
		p.server.Stop() // ends the kubelet's ListAndWatch on the old socket
		p.server = nil
	}
	if err := os.Remove(p.socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	listener, err := net.Listen("unix", p.socket)
	if err != nil {
		return err
	}
	p.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.server, p.service)
	go func(s *grpc.Server) { _ = s.Serve(listener) }(p.server) // returns on Stop
	return nil
}

func (p *plugin) register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+p.kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     p.config.SocketName,
		ResourceName: p.config.ResourceName,
		Options:      &pluginapi.DevicePluginOptions{},
	})
	return err
}

func (p *plugin) stop() {
	if p.server != nil {
		p.server.Stop()
	}
	if err := os.Remove(p.socket); err != nil && !errors.Is(err, fs.ErrNotExist) {
		p.log.say("cannot remove %s: %v", p.socket, err)
	}
}

// sameSocket: the inode alone could be reused by a recreated kubelet.sock; with the
// modification time it cannot plausibly be.
func sameSocket(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.ModTime().Equal(b.ModTime())
}
