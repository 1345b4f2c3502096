package deviceplugin

// The plugin against a fake kubelet: a Registration server on kubelet.sock that records what
// it is told, and a client dialing the plugin's socket as the kubelet's device manager does.

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const wait = 5 * time.Second

type fakeKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	requests chan *pluginapi.RegisterRequest
	server   *grpc.Server
}

func startKubelet(t *testing.T, dir string) *fakeKubelet {
	t.Helper()
	listener, err := net.Listen("unix", filepath.Join(dir, kubeletSocketName))
	if err != nil {
		t.Fatal(err)
	}
	k := &fakeKubelet{requests: make(chan *pluginapi.RegisterRequest, 4), server: grpc.NewServer()}
	pluginapi.RegisterRegistrationServer(k.server, k)
	go func() { _ = k.server.Serve(listener) }()
	t.Cleanup(k.server.Stop)
	return k
}

func (k *fakeKubelet) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.requests <- req
	return &pluginapi.Empty{}, nil
}

func (k *fakeKubelet) awaitRegistration(t *testing.T) {
	t.Helper()
	select {
	case req := <-k.requests:
		got := []string{req.Version, req.Endpoint, req.ResourceName}
		if strings.Join(got, " ") != "v1beta1 gpu.sock nvidia.com/gpu" {
			t.Fatalf("RegisterRequest = %v", got)
		}
	case <-time.After(wait):
		t.Fatal("the plugin did not register")
	}
}

// syncBuffer is the plugin's stdout, written by its RPC goroutines and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func dialPlugin(t *testing.T, socket string) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

func listDevices(t *testing.T, stream pluginapi.DevicePlugin_ListAndWatchClient) string {
	t.Helper()
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var devices []string
	for _, d := range resp.Devices {
		devices = append(devices, d.ID+"="+d.Health)
	}
	return strings.Join(devices, " ")
}

func TestPluginRegistersServesAllocatesAndSurvivesKubeletRestarts(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "gpu.sock")
	kubelet := startKubelet(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := make(chan struct{})
	config := Config{ResourceName: "nvidia.com/gpu", Count: 2, PluginDir: dir, SocketName: "gpu.sock", Product: "TEST"}
	go func() { Run(ctx, config, out, 20*time.Millisecond); close(done) }()

	kubelet.awaitRegistration(t)
	client := dialPlugin(t, socket)
	stream, err := client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if got := listDevices(t, stream); got != "gpu-0=Healthy gpu-1=Healthy" {
		t.Fatalf("ListAndWatch = %q", got)
	}
	resp, err := client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"gpu-1"}}, {DevicesIds: []string{"gpu-0", "gpu-1"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var envs []string
	for _, c := range resp.ContainerResponses {
		envs = append(envs, c.Envs[VisibleDevicesEnv])
	}
	if strings.Join(envs, " ") != "gpu-1 gpu-0,gpu-1" {
		t.Fatalf("Allocate envs = %v", envs)
	}
	_, err = client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"gpu-7"}},
	}})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Allocate of an id never advertised: %v, want InvalidArgument", err)
	}

	// A kubelet restart as the device manager does it: a new kubelet.sock, plugin sockets removed.
	kubelet.server.Stop()
	if err := os.Remove(socket); err != nil {
		t.Fatal(err)
	}
	kubelet = startKubelet(t, dir)
	kubelet.awaitRegistration(t)
	if _, err := stream.Recv(); err == nil {
		t.Fatal("the old ListAndWatch stream outlived the plugin's restart")
	}
	stream, err = dialPlugin(t, socket).ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if got := listDevices(t, stream); got != "gpu-0=Healthy gpu-1=Healthy" {
		t.Fatalf("ListAndWatch after the restart = %q", got)
	}
	// A new kubelet.sock alone (our socket left in place) also means a new kubelet.
	kubelet.server.Stop()
	kubelet = startKubelet(t, dir)
	kubelet.awaitRegistration(t)

	cancel()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("Run did not return after its context ended")
	}
	if _, err := os.Stat(socket); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the plugin's socket is still there: %v", err)
	}
	log := out.String()
	for _, line := range []string{
		"allocate container 0: devices gpu-1 -> NVIDIA_VISIBLE_DEVICES=gpu-1",
		"allocate container 1: devices gpu-0,gpu-1 -> NVIDIA_VISIBLE_DEVICES=gpu-0,gpu-1",
		`allocate refused: container 0: unknown device "gpu-7" (advertised: gpu-0,gpu-1)`,
	} {
		if !strings.Contains(log, line) {
			t.Errorf("log lacks %q:\n%s", line, log)
		}
	}
}
