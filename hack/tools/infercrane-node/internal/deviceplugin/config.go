// Package deviceplugin is a kubelet device plugin that advertises N fake GPUs, so Pods asking for
// nvidia.com/gpu schedule and start on a node without a GPU. Allocate hands the container the
// ids it got in NVIDIA_VISIBLE_DEVICES, as the NVIDIA plugin does; nothing touches a device.
// This file parses the command line and knows nothing of gRPC.
package deviceplugin

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Config is one plugin's command line.
type Config struct {
	ResourceName string
	Count        int
	PluginDir    string // the kubelet's device-plugin socket dir; kubelet.sock lives there
	SocketName   string // our socket, relative to PluginDir (the kubelet's Endpoint)
	Product      string // only named in logs
	ShowVersion  bool
}

// ParseArgs parses args (without the program name); errors are one line for stderr.
func ParseArgs(args []string) (Config, error) {
	var c Config
	fs := flag.NewFlagSet("infercrane-gpu-device-plugin", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.ResourceName, "resource-name", "nvidia.com/gpu", "extended resource to advertise")
	fs.IntVar(&c.Count, "count", 1, "number of fake GPUs")
	fs.StringVar(&c.PluginDir, "plugin-dir", pluginapi.DevicePluginPath, "device-plugin socket directory")
	fs.StringVar(&c.SocketName, "socket-name", "infercrane-gpu.sock", "socket file name in --plugin-dir")
	fs.StringVar(&c.Product, "product", "", "GPU product, named in logs")
	fs.BoolVar(&c.ShowVersion, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	var problems []string
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected arguments: %s", strings.Join(fs.Args(), " ")))
	}
	if c.Count < 1 {
		problems = append(problems, fmt.Sprintf("--count must be at least 1, got %d", c.Count))
	}
	if prefix, name, ok := strings.Cut(c.ResourceName, "/"); !ok || prefix == "" || name == "" {
		problems = append(problems, fmt.Sprintf("--resource-name must be <domain>/<name>, got %q", c.ResourceName))
	}
	if c.SocketName == "" || strings.Contains(c.SocketName, "/") || c.SocketName == kubeletSocketName {
		problems = append(problems, fmt.Sprintf("--socket-name must be a file name other than %s, got %q", kubeletSocketName, c.SocketName))
	}
	if !filepath.IsAbs(c.PluginDir) {
		problems = append(problems, fmt.Sprintf("--plugin-dir must be an absolute path, got %q", c.PluginDir))
	}
	if problems != nil {
		return Config{}, errors.New(strings.Join(problems, "; "))
	}
	return c, nil
}
