package deviceplugin

// The inventory: which device ids exist and what a container gets for some of them. Pure, so
// the allocation rules are tested without a kubelet.

import (
	"fmt"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// VisibleDevicesEnv is where the NVIDIA container stack, and so the workloads, read their GPUs.
const VisibleDevicesEnv = "NVIDIA_VISIBLE_DEVICES"

// Inventory is the fixed set of fake GPUs gpu-0 … gpu-<N-1>, all healthy.
type Inventory struct {
	ids   []string
	known map[string]bool
}

// NewInventory makes count devices.
func NewInventory(count int) Inventory {
	inv := Inventory{known: make(map[string]bool, count)}
	for i := range count {
		id := fmt.Sprintf("gpu-%d", i)
		inv.ids = append(inv.ids, id)
		inv.known[id] = true
	}
	return inv
}

// Devices is the ListAndWatch answer.
func (inv Inventory) Devices() []*pluginapi.Device {
	devices := make([]*pluginapi.Device, 0, len(inv.ids))
	for _, id := range inv.ids {
		devices = append(devices, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	return devices
}

// ContainerEnv is what one container gets for the ids the kubelet chose; an id we never
// advertised (or none at all) is refused, since the kubelet must only pick from our list.
func (inv Inventory) ContainerEnv(ids []string) (map[string]string, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("no device requested")
	}
	for _, id := range ids {
		if !inv.known[id] {
			return nil, fmt.Errorf("unknown device %q (advertised: %s)", id, strings.Join(inv.ids, ","))
		}
	}
	return map[string]string{VisibleDevicesEnv: strings.Join(ids, ",")}, nil
}
