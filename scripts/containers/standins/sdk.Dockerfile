# Test stand-in for mcr.microsoft.com/dotnet/sdk:10.0, for machines that reach no image registry: the runtime
# stand-in plus this machine's .NET SDK and targeting packs (the build context, prepared by base-images.mjs). Enough
# to `dotnet publish` an app without package references, offline. Used by the container test only.
FROM mcr.microsoft.com/dotnet/runtime:10.0
ARG SDK_VERSION
ENV DOTNET_SDK_VERSION=$SDK_VERSION DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 DOTNET_GENERATE_ASPNET_CERTIFICATE=false
COPY sdk /usr/share/dotnet/sdk/
COPY sdk-manifests /usr/share/dotnet/sdk-manifests/
COPY packs /usr/share/dotnet/packs/
RUN dotnet --version
