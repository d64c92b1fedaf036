// For GoogleTest binaries that run under mpirun (tps_add_mpi_gtest): the
// session that tests/mpi_gtest_main.cpp opens for the whole binary.
#pragma once

#include "runtime/mpi_session.h"

namespace tps::testing {
const MpiSession& mpi();
}
