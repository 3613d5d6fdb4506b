! A Fortran simulation writing its output through strata's C API (ISO_C_BINDING).
!
!   gfortran heat.f90 -L $TARGET/release -lstrata -o heat_f && ./heat_f out.strata
!
! Fortran arrays are column-major: temp(lon, lat) in Fortran is temp[lat][lon] in C order,
! so the store's dimensions are listed slowest first: time, lat, lon.
module strata
  use iso_c_binding
  implicit none
  enum, bind(c)
    enumerator :: STRATA_STATUS_OK = 0
  end enum
  integer(c_int), parameter :: STRATA_TYPE_F32 = 9, STRATA_TYPE_F64 = 10
  interface
    function strata_create(path, config, w) bind(c, name="strata_create") result(s)
      import :: c_char, c_ptr, c_int
      character(kind=c_char), intent(in) :: path(*)
      type(c_ptr), value :: config
      type(c_ptr), intent(out) :: w
      integer(c_int) :: s
    end function
    function strata_def_dim(w, name, size) bind(c, name="strata_def_dim") result(s)
      import :: c_char, c_ptr, c_int, c_int64_t
      type(c_ptr), value :: w
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int64_t), value :: size
      integer(c_int) :: s
    end function
    function strata_def_var(w, name, dtype, ndims, dims) bind(c, name="strata_def_var") result(s)
      import :: c_char, c_ptr, c_int, c_size_t
      type(c_ptr), value :: w
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: dtype
      integer(c_size_t), value :: ndims
      type(c_ptr), intent(in) :: dims(*)
      integer(c_int) :: s
    end function
    function strata_put_att_text(w, var, name, value) bind(c, name="strata_put_att_text") result(s)
      import :: c_char, c_ptr, c_int
      type(c_ptr), value :: w
      character(kind=c_char), intent(in) :: var(*), name(*), value(*)
      integer(c_int) :: s
    end function
    function strata_append(w, var, data, nbytes) bind(c, name="strata_append") result(s)
      import :: c_char, c_ptr, c_int, c_size_t
      type(c_ptr), value :: w
      character(kind=c_char), intent(in) :: var(*)
      type(c_ptr), value :: data
      integer(c_size_t), value :: nbytes
      integer(c_int) :: s
    end function
    function strata_commit(w, version) bind(c, name="strata_commit") result(s)
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: w
      integer(c_int64_t), intent(out) :: version
      integer(c_int) :: s
    end function
    function strata_last_error() bind(c, name="strata_last_error") result(p)
      import :: c_ptr
      type(c_ptr) :: p
    end function
  end interface
contains
  subroutine check(s, what)
    integer(c_int), intent(in) :: s
    character(*), intent(in) :: what
    character(kind=c_char), pointer :: msg(:)
    integer :: n
    if (s /= STRATA_STATUS_OK) then
      call c_f_pointer(strata_last_error(), msg, [1024])
      n = 0
      do while (msg(n + 1) /= c_null_char .and. n < 1024)
        n = n + 1
      end do
      print '(a, " failed (status ", i0, "): ", 1024a)', what, s, msg(1:n)
      stop 1
    end if
  end subroutine
end module

program heat
  use strata
  implicit none
  integer, parameter :: nlat = 48, nlon = 96, steps = 24
  type(c_ptr) :: w
  character(len=256) :: path
  character(kind=c_char, len=5), target :: d_time = "time" // c_null_char
  character(kind=c_char, len=4), target :: d_lat = "lat" // c_null_char
  character(kind=c_char, len=4), target :: d_lon = "lon" // c_null_char
  type(c_ptr) :: dims3(3), dims1(1)
  real(c_float), target :: temp(nlon, nlat)
  real(c_double), target :: hours
  integer(c_int64_t) :: version
  integer :: t, i, j

  call get_command_argument(1, path)
  call check(strata_create(trim(path) // c_null_char, c_null_ptr, w), "create")
  call check(strata_def_dim(w, d_time, 0_c_int64_t), "def_dim")
  call check(strata_def_dim(w, d_lat, int(nlat, c_int64_t)), "def_dim")
  call check(strata_def_dim(w, d_lon, int(nlon, c_int64_t)), "def_dim")
  dims1 = [c_loc(d_time)]
  dims3 = [c_loc(d_time), c_loc(d_lat), c_loc(d_lon)]
  call check(strata_def_var(w, "time" // c_null_char, STRATA_TYPE_F64, 1_c_size_t, dims1), "def_var")
  call check(strata_def_var(w, "temp" // c_null_char, STRATA_TYPE_F32, 3_c_size_t, dims3), "def_var")
  call check(strata_put_att_text(w, "temp" // c_null_char, "units" // c_null_char, "K" // c_null_char), "att")
  do t = 0, steps - 1
    do j = 1, nlat
      do i = 1, nlon
        temp(i, j) = 270.0 + real(mod(i * 7 + j * 3 + t, 41)) * 0.5
      end do
    end do
    hours = 6.0d0 * t
    call check(strata_append(w, "time" // c_null_char, c_loc(hours), 8_c_size_t), "append time")
    call check(strata_append(w, "temp" // c_null_char, c_loc(temp), int(4 * nlat * nlon, c_size_t)), "append temp")
  end do
  call check(strata_commit(w, version), "commit")
  print '("fortran wrote version ", i0, " with ", i0, " steps")', version, steps
end program
