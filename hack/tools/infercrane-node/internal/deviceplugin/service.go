package deviceplugin

// The DevicePlugin gRPC service the kubelet calls on our socket: options, the device list
// (one answer, then held open: fake devices never change health) and Allocate, logged one line
// per container so a test or a person can see which Pod got which GPU.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

type service struct {
	pluginapi.UnimplementedDevicePluginServer
	inventory Inventory
	log       *lineLog
}

// lineLog serializes log lines written from concurrent RPCs.
type lineLog struct {
	mu  sync.Mutex
	out io.Writer
}

func (l *lineLog) say(format string, a ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, "infercrane-gpu-device-plugin: "+format+"\n", a...)
}

// GetDevicePluginOptions: neither PreStartContainer nor GetPreferredAllocation is wanted.
func (s *service) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends the inventory once and holds the stream until the kubelet or we end it.
func (s *service) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: s.inventory.Devices()}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func (s *service) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for i, container := range req.GetContainerRequests() {
		env, err := s.inventory.ContainerEnv(container.GetDevicesIds())
		if err != nil {
			s.log.say("allocate refused: container %d: %v", i, err)
			return nil, status.Errorf(codes.InvalidArgument, "container %d: %v", i, err)
		}
		s.log.say("allocate container %d: devices %s -> %s=%s", i,
			strings.Join(container.GetDevicesIds(), ","), VisibleDevicesEnv, env[VisibleDevicesEnv])
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{Envs: env})
	}
	return resp, nil
}
