package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/nodejs/npm"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

// GeneratePackage writes the TypeScript SDK of the package whose schema the engine sends (the
// first half of `pulumi package add`), with Pulumi's own Node.js code generator.
func (*nodeHost) GeneratePackage(
	_ context.Context, req *pulumirpc.GeneratePackageRequest,
) (*pulumirpc.GeneratePackageResponse, error) {
	loader, err := schema.NewLoaderClient(req.GetLoaderTarget())
	if err != nil {
		return nil, err
	}
	defer loader.Close()
	var spec schema.PackageSpec
	if err := json.Unmarshal([]byte(req.GetSchema()), &spec); err != nil {
		return nil, fmt.Errorf("the package's schema: %w", err)
	}
	references := schema.NewCachedLoader(loader)
	pkg, diagnostics, err := schema.BindSpec(spec, references, schema.ValidationOptions{})
	if err != nil {
		return nil, err
	}
	answer := &pulumirpc.GeneratePackageResponse{
		Diagnostics: plugin.HclDiagnosticsToRPCDiagnostics(diagnostics),
	}
	if diagnostics.HasErrors() {
		return answer, nil
	}
	files, err := nodejs.GeneratePackage("pulumi-language-nodejs", pkg, req.GetExtraFiles(),
		req.GetLocalDependencies(), req.GetLocal(), references)
	if err != nil {
		return nil, err
	}
	for name, contents := range files {
		path := filepath.Join(req.GetDirectory(), name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, contents, 0o644); err != nil {
			return nil, err
		}
	}
	return answer, nil
}

// Link adds each generated SDK to the program's package.json as a local dependency (the second
// half of `pulumi package add`), under the name the generator gives a package whose schema names
// no Node.js package: @pulumi/<package>.
func (*nodeHost) Link(ctx context.Context, req *pulumirpc.LinkRequest) (*pulumirpc.LinkResponse, error) {
	program := req.GetInfo().GetProgramDirectory()
	manager, err := npm.ResolvePackageManager(npm.AutoPackageManager, program)
	if err != nil {
		return nil, err
	}
	told := "Install it with `npm install`, then import it:\n"
	for _, dependency := range req.GetPackages() {
		name := "@pulumi/" + dependency.GetPackage().GetName()
		if err := manager.Link(ctx, program, name, dependency.GetPath()); err != nil {
			return nil, err
		}
		told += fmt.Sprintf("  import * as %s from %q;\n", dependency.GetPackage().GetName(), name)
	}
	return &pulumirpc.LinkResponse{ImportInstructions: told}, nil
}
