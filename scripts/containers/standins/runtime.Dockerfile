# Test stand-in for mcr.microsoft.com/dotnet/runtime:10.0, for machines that reach no image registry: Debian trixie
# with the libraries the official image installs, and this machine's .NET runtime (the build context, prepared by
# base-images.mjs) where the official image has it. Used by the container test only.
FROM debian:trixie-slim
ARG DOTNET_VERSION
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libc6 libgcc-s1 libicu76 libssl3t64 libstdc++6 tzdata \
      zlib1g \
 && rm -rf /var/lib/apt/lists/*
ENV APP_UID=1654 DOTNET_RUNNING_IN_CONTAINER=true DOTNET_VERSION=$DOTNET_VERSION
COPY dotnet LICENSE.txt /usr/share/dotnet/
COPY host /usr/share/dotnet/host/
COPY shared /usr/share/dotnet/shared/
RUN ln -s /usr/share/dotnet/dotnet /usr/bin/dotnet && dotnet --list-runtimes
