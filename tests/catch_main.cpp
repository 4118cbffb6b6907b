// SPDX-License-Identifier: Apache-2.0
// Catch2 main, compiled once into its own translation unit.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
